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
