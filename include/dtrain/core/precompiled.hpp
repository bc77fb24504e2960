#pragma once

/// @file
/// The instantiations that the optional CMake target dtrain::precompiled compiles once, so that the
/// programs linking it do not compile them again in every translation unit.
///
/// Each header names its common instantiations (float and double layers, models, losses and optimizers;
/// the DistOptimizer of every communicator with SGD, Adam and AdamW on float) with
/// DTRAIN_PRECOMPILED_INSTANCE(class Name<Args>). Without DTRAIN_PRECOMPILED it expands to nothing: the
/// library stays header-only and every use is compiled where it happens. With DTRAIN_PRECOMPILED (defined
/// by dtrain::precompiled for the programs that link it) it declares the instance `extern template`, and in
/// the one translation unit of dtrain::precompiled (which also defines DTRAIN_PRECOMPILED_DEFINE) it is the
/// explicit instantiation definition. Results are the same either way; only where the code is compiled
/// changes. Instantiations not named (other element types, user layers, user communicators) are compiled
/// where they are used, as without the target.

#if defined(DTRAIN_PRECOMPILED_DEFINE)
/// Explicit instantiation definition (the translation unit of dtrain::precompiled).
#define DTRAIN_PRECOMPILED_INSTANCE(...) template __VA_ARGS__;
#elif defined(DTRAIN_PRECOMPILED)
/// Explicit instantiation declaration: compiled in dtrain::precompiled.
#define DTRAIN_PRECOMPILED_INSTANCE(...) extern template __VA_ARGS__;
#else
/// Header-only: nothing.
#define DTRAIN_PRECOMPILED_INSTANCE(...)
#endif

/// The non-template functions a program calls directly (Environment's constructor and destructor,
/// read_csv, the DataLoader's members, ...) are declared DTRAIN_INLINE and defined in their header under
/// `#if DTRAIN_HEADER_DEFINITIONS`. Header-only, they are inline functions compiled in every translation
/// unit that calls them, together with everything they call (the watchdog, the CSV parser, ...). With
/// DTRAIN_PRECOMPILED the program sees only their declarations and links the one definition compiled in
/// dtrain::precompiled.
#if defined(DTRAIN_PRECOMPILED)
/// With dtrain::precompiled: nothing, the function is defined once in the library.
#define DTRAIN_INLINE
#else
/// Header-only: `inline`.
#define DTRAIN_INLINE inline
#endif

#if !defined(DTRAIN_PRECOMPILED) || defined(DTRAIN_PRECOMPILED_DEFINE)
/// 1: the headers define their DTRAIN_INLINE functions (header-only, and in dtrain::precompiled itself).
#define DTRAIN_HEADER_DEFINITIONS 1
#else
/// 0: a program linking dtrain::precompiled sees the declarations only.
#define DTRAIN_HEADER_DEFINITIONS 0
#endif
