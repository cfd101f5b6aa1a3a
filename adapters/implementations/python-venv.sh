# Sourced by the Python folders' setup scripts (bash): how a folder's .venv/ is made and filled.
#   venv_install VENV PIP_INSTALL_ARGS...   create VENV once, then pip install the arguments into it
# The venv gets no pip of its own: the pip of the python3 running setup installs into it
# (pip >= 22.3, `pip --python`). ensurepip installing pip and setuptools into each new venv
# cost 3-5 CPU-s (4 s of wall time, 13 s on a loaded machine) and nothing there uses them: an editable
# install of the kit builds with the setuptools pip puts in its own isolated build env.
# A python3 without pip, or with an older one, makes the venv with its own pip, as before.
venv_install() {
    local venv="$1" python
    shift
    # python3's own path, so that a version manager's shim (pyenv's) runs once, not per call;
    # only when its pip can install into another environment.
    if python="$(python3 -c 'import sys, pip
if tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3): sys.exit(1)
print(sys.executable)' 2>/dev/null)"; then
        [ -x "$venv/bin/python" ] || "$python" -m venv --without-pip "$venv"
        "$python" -m pip --python "$venv/bin/python" install "$@"
    else
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        # A venv an earlier setup made without pip, when python3 had one.
        [ -x "$venv/bin/pip" ] || "$venv/bin/python" -m ensurepip --default-pip >/dev/null
        "$venv/bin/pip" install "$@"
    fi
}
