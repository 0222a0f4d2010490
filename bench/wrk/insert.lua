-- Inserts distinct links through the writer's JSON API for `make bench`:
--   wrk ... -s insert.lua <writer url> -- RUN_ID TOKEN
-- Prints one line "BENCH_JSON {...}" with the figures.

local figures = require("figures")

setup = figures.setup

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
    figures.print(summary, latency, nil, 0)
end
