# Sourced by the bash suites that drive a real server (tests/schemathesis, tests/sdk/typescript):
# one way to start it on a fresh data directory and read what a first start prints.
#
# start_server WHAT BIN WORK: runs `BIN serve` on WORK/config.toml with the data directory
# WORK/data, its stdout and stderr in WORK/stdout and WORK/stderr, and waits until it reports
# its address. Sets SERVER_PID, ROOT (`http://ADDR`) and KEY (the admin key a first start
# prints). On failure prints why (WHAT names the suite) with the server's stderr, and exits 1.
# The caller stops the server (SERVER_PID).
start_server() {
    local what="$1" bin="$2" work="$3"
    "$bin" serve --config "$work/config.toml" --data-dir "$work/data" \
        >"$work/stdout" 2>"$work/stderr" &
    SERVER_PID=$!
    ROOT=""
    for _ in $(seq 1 200); do
        ROOT="$(sed -n 's/.*runledger listening on \(http:[^ ]*\).*/\1/p' "$work/stderr" | head -n 1)"
        [[ -n "$ROOT" ]] && break
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "$what: the server exited during startup:" >&2
            cat "$work/stderr" >&2
            exit 1
        fi
        sleep 0.1
    done
    if [[ -z "$ROOT" ]]; then
        echo "$what: the server did not report its address" >&2
        cat "$work/stderr" >&2
        exit 1
    fi
    KEY="$(head -n 1 "$work/stdout")"
    if [[ "$KEY" != rl_* ]]; then
        echo "$what: no admin key on the server's stdout" >&2
        exit 1
    fi
}
