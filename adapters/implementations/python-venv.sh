# Sourced by the Python folders' setup scripts (bash): how a folder's .venv/ is made and filled.
#   venv_install VENV [PIP_INSTALL_ARGS...]   create VENV once, pip install the arguments into it
#                                             (none: no pip run), and link the kit's harness side
# The venv gets no pip of its own: the pip of the python3 running setup installs into it, run
# by the venv's python (pip >= 22.3 ships the runner that `pip --python` starts for this).
# ensurepip installing pip and setuptools into each new venv cost 3-5 CPU-s (4 s of wall
# time, 13 s on a loaded machine) and nothing there uses them; `pip --python` itself first
# imports all of pip in python3 only to start that runner (0.3-1 CPU-s an install).
# A python3 without pip, or with an older one, makes the venv with its own pip, as before.
kit_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

venv_install() {
    local venv="$1" found python runner
    shift
    # python3's own path, so that a version manager's shim (pyenv's) runs once, not per call,
    # and its pip's runner; only when that pip can install into another environment.
    if found="$(python3 -c 'import os, sys, pip
if tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3): sys.exit(1)
print(sys.executable)
print(os.path.join(os.path.dirname(pip.__file__), "__pip-runner__.py"))' 2>/dev/null)" &&
        { read -r python && read -r runner; } <<<"$found" && [ -f "$runner" ]; then
        [ -x "$venv/bin/python" ] || "$python" -m venv --without-pip "$venv"
        [ $# -eq 0 ] || "$venv/bin/python" "$runner" install "$@"
    else
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        # A venv an earlier setup made without pip, when python3 had one.
        [ -x "$venv/bin/pip" ] || "$venv/bin/python" -m ensurepip --default-pip >/dev/null
        [ $# -eq 0 ] || "$venv/bin/pip" install "$@"
    fi
    kit_link "$venv"
}

# The kit as a folder's harness, service and listing import it: retryproof.spec and
# retryproof.adapters, linked from this checkout into the venv (live, as `pip install -e`
# made them). They import only the standard library (tests/adapters/test_bundled_implementations.py
# checks it). `pip install -e` of the kit cost 2-5 CPU-s a venv: a build environment with
# setuptools from the index, four build-hook processes, and the resolution of the kit's own
# dependencies (hypothesis, jsonschema, ...), which only its command line imports.
kit_link() {
    local site package
    site="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    mkdir -p "$site/retryproof"
    for package in spec adapters; do
        ln -sfn "$kit_root/$package" "$site/retryproof/$package"
    done
}
