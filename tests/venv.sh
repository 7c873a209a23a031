# Sourced by the Python suites' run.sh scripts (tests/sdk, tests/schemathesis, tests/models):
# one way to pick the interpreter and to build a venv with pinned packages, rebuilt only when
# the pins change.
#
# PYTHON overrides the interpreter (default: python3.11, else python3).

if [[ -n "${PYTHON:-}" ]]; then
    PY="$PYTHON"
elif command -v python3.11 >/dev/null 2>&1; then
    PY=python3.11
else
    PY=python3
fi

# ensure_venv DIR WHAT PACKAGE==VERSION...: a venv at DIR holding exactly these pins. WHAT names
# it in the one line printed when it is (re)built.
ensure_venv() {
    local venv="$1" what="$2"
    shift 2
    local pins="$*"
    local stamp="$venv/.runledger-pins-${pins//[^A-Za-z0-9.=_-]/_}"
    if [[ -f "$stamp" && -x "$venv/bin/python" ]]; then
        return 0
    fi
    echo "==> creating venv for $what at $venv" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    touch "$stamp"
}
