# Sourced by .ci/run and .ci/matrix: the interpreters and the tools, the same way for both.
# pyenv: expose the newest installed patch release of every Python this
# project tests on; 3.11 goes first, so `python3` is 3.11 (tox's own Python).
# A minor missing here is not hidden: the tox env that needs it fails.
if command -v pyenv >/dev/null 2>&1; then
    versions=()
    for minor in 3.11 3.8 3.9 3.10 3.12 3.13; do
        v=$(pyenv versions --bare --skip-aliases 2>/dev/null \
            | grep -E "^${minor//./\\.}\.[0-9]+$" | sort -V | tail -n 1 || true)
        if [[ -n "$v" ]]; then versions+=("$v"); fi
    done
    if ((${#versions[@]})); then
        PYENV_VERSION=$(IFS=:; echo "${versions[*]}")
        export PYENV_VERSION
        echo "PYENV_VERSION=$PYENV_VERSION"
    fi
fi
export UV_PYTHON_DOWNLOADS=never

# Throwaway venv for the tools, inside tox's work dir (.tox/ is disposable).
tools=.tox/.ci-tools
if [[ ! -x "$tools/bin/python3" ]]; then
    rm -rf "$tools"
    python3 -m venv "$tools"
fi
# shellcheck disable=SC1091
source "$tools/bin/activate"
python3 --version

