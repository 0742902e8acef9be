"""brrr in a Jupyter notebook: C++ cells that run brrr's C++ API (notebooks/README.md).

The first cell of every notebook is

    import brrr_notebook as nb
    nb.setup()

which loads build/libbrrr.so into this Python process through cppyy (a C++ interpreter,
Cling, with Python bindings), includes brrr/brrr.h, and registers the %%cpp cell magic.
A %%cpp cell is C++ run by the interpreter; what it declares stays for the cells after it,
as in a Python notebook. `%%cpp gpu` marks a cell that needs a CUDA GPU: it is skipped, with
a message, when brrr::cuda::gpu_available() is false. nb.show("loss.png") displays a PNG
that a cell wrote with brrr's plotting (brrr/plot.h) into notebook::out_dir.
"""
import contextlib
import os
import pathlib
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
_state = {"ready": False, "out_dir": None}


def build_dir():
    """The build folder holding libbrrr.so: $BRRR_BUILD_DIR (relative to the checkout), else
    build/ in the checkout."""
    return ROOT / os.environ.get("BRRR_BUILD_DIR", "build")


def shared_dir():
    """The shared folder beside the checkout (data/tinyshakespeare.txt), or $BRRR_SHARED_DIR."""
    return pathlib.Path(os.environ.get("BRRR_SHARED_DIR", ROOT.parent / "shared"))


def setup(name=None):
    """Loads brrr into this process once; later calls only report. `name` names the folder
    under out/notebooks that cells write their files to (notebook::out_dir in C++)."""
    import cppyy

    if _state["ready"]:
        return
    library = build_dir() / "libbrrr.so"
    if not library.exists():
        raise RuntimeError(
            f"{library} not found. Build brrr as a shared library first:\n"
            f"  cmake -S {ROOT} -B {build_dir()} -DBRRR_SHARED=ON\n"
            f"  cmake --build {build_dir()} --target brrr_shared")
    for include in ("base/include", "kernels/include", "plot/include", "framework/include", "models/include", "tokenizer/include", ""):
        cppyy.add_include_path(str(ROOT / include))
    # The library carries its own OpenMP and PCRE2; cppyy needs only brrr's symbols from it.
    cppyy.load_library(str(library))
    cppyy.include("brrr/brrr.h")
    out_dir = ROOT / "out" / "notebooks" / (name or "scratch")
    out_dir.mkdir(parents=True, exist_ok=True)
    _state["out_dir"] = out_dir
    # What every notebook's C++ may use: where to write files, the text the examples learn
    # from, a flush so output reaches the cell before it ends, and check() for the facts the
    # text states.
    cppyy.cppdef(r"""
        #include <cstdio>
        #include <fstream>
        #include <iostream>
        #include <stdexcept>
        #include <string>
        namespace notebook {
        inline std::string out_dir = "%s";
        inline std::string shared_dir = "%s";
        // out("loss.png"): a path inside this notebook's output folder.
        inline std::string out(const std::string& name) { return out_dir + "/" + name; }
        // The first `bytes` bytes of tinyshakespeare when it is beside the checkout; else a
        // short text of our own, repeated (so a notebook runs anywhere).
        inline std::string text_sample(std::size_t bytes) {
          std::ifstream f(shared_dir + "/data/tinyshakespeare.txt", std::ios::binary);
          std::string text(bytes, '\0');
          if (f) {
            f.read(text.data(), static_cast<std::streamsize>(bytes));
            text.resize(static_cast<std::size_t>(f.gcount()));
            if (!text.empty()) return text;
          }
          const std::string verse =
              "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
              "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n\n";
          text.clear();
          while (text.size() < bytes) text += verse;
          text.resize(bytes);
          return text;
        }
        inline void flush() { std::cout.flush(); std::cerr.flush(); std::fflush(nullptr); }
        // check(ok, "the loss falls"): a fact the text states, held to. True prints it after a
        // tick; false throws, so the cell fails and so does the notebook's test (tests/notebooks).
        inline void check(bool ok, const std::string& fact) {
          if (!ok) throw std::runtime_error("notebook check failed: " + fact);
          std::cout << "checked: " << fact << "\n";
        }
        }  // namespace notebook
        """ % (out_dir, shared_dir()))
    _state["ready"] = True
    _register_magic()
    gpu = bool(cppyy.gbl.brrr.cuda.gpu_available())
    print(f"brrr loaded from {library} (C++20 through cppyy {cppyy.__version__}); "
          f"files go to {out_dir}; GPU: {'yes' if gpu else 'no (GPU cells will be skipped)'}")


@contextlib.contextmanager
def _forward_output():
    """While C++ runs, its stdout and stderr (file descriptors 1 and 2, which std::cout and
    printf write to) go through a pipe to this cell's output, as they come."""
    import cppyy

    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    saved = os.dup(1), os.dup(2)
    os.dup2(write_end, 1)
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump():
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                sys.stdout.write(chunk.decode("utf-8", "replace"))
                sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        yield
    finally:
        cppyy.gbl.notebook.flush()
        os.dup2(saved[0], 1)  # the last writers of the pipe go away: the reader sees its end
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        reader.join()


class CppError(Exception):
    """A C++ cell did not compile, or threw."""


def cpp(code, gpu=False):
    """Runs C++ statements and declarations; what they declare stays for later cells."""
    import cppyy

    if not _state["ready"]:
        raise RuntimeError("call brrr_notebook.setup() first")
    if gpu and not cppyy.gbl.brrr.cuda.gpu_available():
        print("skipped: this cell needs a CUDA GPU, and brrr::cuda::gpu_available() is false here")
        return
    # #include lines and using-directives go to the global scope first: the interpreter runs
    # the rest of a cell as the body of a function, where a header cannot be included and a
    # using-directive would not outlive the cell.
    lines = code.split("\n")
    is_global = [l.lstrip().startswith(("#include", "using namespace")) for l in lines]
    includes = "\n".join(l for l, g in zip(lines, is_global) if g)
    body = "\n".join(l for l, g in zip(lines, is_global) if not g)
    try:
        with _forward_output():
            if includes:
                cppyy.cppdef(includes)
            if body.strip():
                cppyy.cppexec(body)
    except SyntaxError as e:
        # cppyy reports both a compile error and a C++ exception as a SyntaxError; the text
        # after "compilation failed:" is the exception's what().
        message = str(e).replace("Failed to parse the given C++ code", "").strip()
        if message.startswith("compilation failed:"):
            message = "the C++ code threw: " + message[len("compilation failed:"):].strip()
        raise CppError(message) from None


def show(name, width=None):
    """Displays a PNG from this notebook's output folder (or any path) in the cell's output."""
    from IPython.display import Image, display

    path = pathlib.Path(name)
    if not path.is_absolute():
        path = _state["out_dir"] / path
    display(Image(filename=str(path), width=width))


def _register_magic():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def cpp_magic(line, cell):
        cpp(cell, gpu="gpu" in line.split())

    shell.register_magic_function(cpp_magic, magic_kind="cell", magic_name="cpp")
