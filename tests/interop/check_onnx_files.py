#!/usr/bin/env python3
"""Runs onnx.checker.check_model(full_check=True) on the ONNX files in DIRECTORY (ctest
interop.onnx_checker, through run_onnx_checker.sh). full_check adds strict shape inference to the
structural check: every node's inputs, types and attributes must fit its operator at the model's opset,
and the inferred shapes must agree with the declared input and output.

Prints "<file>: onnx.checker passed (opset N, ir_version M)" per file. Exits 1 with the checker's message
for a file it refuses, and when the files are not exactly NAME.onnx for the NAMEs given (so a run that
wrote no file fails). Exits 77 (ctest: Skipped) when the onnx module is missing.

Usage: check_onnx_files.py DIRECTORY NAME...
"""
import pathlib
import sys


def main(argv):
    if len(argv) < 3:
        print("usage: check_onnx_files.py DIRECTORY NAME...", file=sys.stderr)
        return 2
    try:
        import onnx
        import onnx.checker
    except ImportError as e:
        print(f"SKIPPED: the Python module onnx is not installed ({e}); "
              "scripts/install-deps.sh --onnx installs it (Debian python3-onnx)")
        return 77
    directory = pathlib.Path(argv[1])
    expected = sorted(argv[2:])
    found = sorted(p.stem for p in directory.glob("*.onnx"))
    if found != expected:
        print(f"FAILED: expected the ONNX files {expected} in {directory}, found {found}")
        return 1
    print(f"onnx {onnx.__version__}")
    failed = 0
    for name in expected:
        path = directory / f"{name}.onnx"
        try:
            # The loaded model, not the path: check_model(path, full_check=True) writes the inferred shapes
            # back into the file.
            model = onnx.load(str(path))
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # ValidationError, shape inference's InferenceError, a DecodeError
            print(f"{path.name}: onnx.checker FAILED: {type(e).__name__}: {e}")
            failed += 1
            continue
        opsets = ", ".join(f"opset {o.version}" if o.domain in ("", "ai.onnx") else f"{o.domain} {o.version}"
                           for o in model.opset_import)
        print(f"{path.name}: onnx.checker passed ({opsets}, ir_version {model.ir_version})")
    if failed:
        print(f"FAILED: {failed} of {len(expected)} files")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
