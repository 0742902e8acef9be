"""Runs one notebook headless, top to bottom, and fails on the first cell that errors.

    run_notebook.py NOTEBOOK.ipynb OUT_DIR

The ctest entries of tests/notebooks/CMakeLists.txt call it (label `notebook`). The executed
copy, outputs and images included, is written to OUT_DIR/NAME.ipynb for a look afterwards.
Exit status 77 (ctest: skipped) when the Python packages the notebooks need are missing.
"""
import json
import os
import pathlib
import sys
import tempfile
import time

SKIP = 77


def main():
    notebook_path, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    try:
        import cppyy  # noqa: F401  (the kernel imports it; checked here to skip early)
        import nbclient
        import nbformat
    except ImportError as e:
        print(f"skipped: {e}; scripts/setup.sh installs cppyy, ipykernel and nbclient into .venv")
        return SKIP

    # The kernel must be this Python (the .venv that has cppyy), whatever other "python3"
    # kernels the machine has: a kernel spec of our own, found first through JUPYTER_PATH.
    with tempfile.TemporaryDirectory() as jupyter_dir:
        spec_dir = pathlib.Path(jupyter_dir) / "kernels" / "python3"
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (brrr)", "language": "python"}))
        os.environ["JUPYTER_PATH"] = jupyter_dir + os.pathsep + os.environ.get("JUPYTER_PATH", "")
        # Cells import brrr_notebook from the notebooks folder, their working directory.
        os.environ["PYTHONPATH"] = str(notebook_path.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")

        notebook = nbformat.read(notebook_path, as_version=4)
        # The kernel talks over Unix sockets in the scratch folder, not TCP ports: notebooks run
        # side by side (ctest -j), and two kernels picking the same free port made one fail
        # ("ZMQError: Address already in use").
        from jupyter_client.manager import KernelManager
        kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(pathlib.Path(jupyter_dir) / "kernel"))
        client = nbclient.NotebookClient(notebook, km=kernel, timeout=240, kernel_name="python3",
                                         resources={"metadata": {"path": str(notebook_path.parent)}})
        start = time.monotonic()
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as e:
            print(f"{notebook_path.name}: a cell failed\n{e}")
            return 1
        finally:
            out_dir.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, out_dir / notebook_path.name)
    code_cells = sum(1 for c in notebook.cells if c.cell_type == "code")
    images = sum(1 for c in notebook.cells if c.cell_type == "code"
                 for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    print(f"{notebook_path.name}: {code_cells} code cells ran in {time.monotonic() - start:.1f} s, "
          f"{images} images shown; executed copy: {out_dir / notebook_path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
