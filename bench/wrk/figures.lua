-- What every `make bench` wrk script shares: each thread numbered (`id`)
-- and kept, to read its counters at the end, and the one "BENCH_JSON {...}"
-- line bench.py reads. Found through LUA_PATH, which bench.py sets.

local figures = { threads = {} }

-- wrk's `setup`: numbers the thread and keeps it.
function figures.setup(thread)
    thread:set("id", #figures.threads)
    table.insert(figures.threads, thread)
end

-- Which of `count` keys a thread asks for as its `nth` request (from 0),
-- when each key is to be asked for once: the threads take interleaved
-- keys. Past the last key it starts again, and says so (true).
function figures.fresh_index(nth, thread_count, count)
    local index = id + nth * thread_count + 1
    if index > count then
        return (index - 1) % count + 1, true
    end
    return index, false
end

-- The sum of one global counter over every thread (0 where unset).
function figures.sum(name)
    local total = 0
    for _, thread in ipairs(figures.threads) do
        total = total + (thread:get(name) or 0)
    end
    return total
end

-- Prints the figures of a run; `non_3xx` is nil when answers were not
-- counted by status, `reused_keys` how often a key was asked for again,
-- `more` (optional) further JSON members.
function figures.print(summary, latency, non_3xx, reused_keys, more)
    local e = summary.errors
    local sockets = e.connect + e.read + e.write + e.timeout
    io.write(string.format(
        'BENCH_JSON {"requests": %d, "duration_us": %d, "errors": %d, "socket_errors": %d, "non_3xx": %s, ' ..
        '"socket_error_kinds": {"connect": %d, "read": %d, "write": %d, "timeout": %d}, ' ..
        '"p50_us": %d, "p99_us": %d, "reused_keys": %d%s}\n',
        summary.requests, summary.duration, sockets + e.status, sockets,
        non_3xx and tostring(non_3xx) or "null", e.connect, e.read, e.write, e.timeout,
        latency:percentile(50), latency:percentile(99), reused_keys, more and (", " .. more) or ""))
end

return figures
