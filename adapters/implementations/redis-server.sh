#!/usr/bin/env bash
# A private redis-server on loopback, for the implementations whose library persists in Redis.
#   redis-server.sh start RUN_DIR PORT   a fresh server (empty data), data and pid file under RUN_DIR
#   redis-server.sh stop RUN_DIR         stop the server of RUN_DIR's pid file, and no other process
# Configured for durability: an append-only file fsynced on every write (appendfsync always),
# no snapshots. redis-server comes from the system packages (installed by the caller's setup).
set -euo pipefail
action="$1"
run="${2:-}"

stop() {
    [ -f "$run/redis.pid" ] || return 0
    pid="$(cat "$run/redis.pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
    fi
    rm -f "$run/redis.pid"
}

start() {
    port="$1"
    stop
    rm -rf "$run" && mkdir -p "$run"
    redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes --daemonize yes \
        --dir "$run" --pidfile "$run/redis.pid" --logfile "$run/redis.log" \
        --appendonly yes --appendfsync always --save ""
    for _ in $(seq 100); do
        if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "redis-server on 127.0.0.1:$port (pid $(cat "$run/redis.pid"))"
            return 0
        fi
        sleep 0.1
    done
    echo "redis-server did not answer on 127.0.0.1:$port; see $run/redis.log" >&2
    return 1
}

install() {
    command -v redis-server >/dev/null && return 0
    apt-get install -y -q redis-server >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q redis-server >/dev/null; }
}

case "$action" in
    start) start "$3" ;;
    stop) stop ;;
    install) install ;;
    *) echo "usage: $0 install|start RUN_DIR PORT|stop RUN_DIR" >&2; exit 2 ;;
esac
