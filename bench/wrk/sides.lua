-- Measures several sides of `make bench` in one run, taking turns:
--   wrk ... -s sides.lua <url> -- TURN_MS SETTLE_MS THREADS KEYFILE PATH HOST QUERY SPREAD HEADER [KEYFILE ...]
-- THREADS is wrk's thread count. Each side is six arguments: its keys,
-- what comes before each key, the Host header ("-": the URL's), a query
-- sent with every key (without its "?"; "-": none), "spread" to send each
-- request as one of visitors.lua's devices and languages, "fresh" to ask
-- for each key once, in the file's order, as one browser ("-": random
-- keys as one browser), and one more header sent with each request
-- ("Name: value"; "-": none), which a VCL can route the side by. Keys are
-- asked for uniformly at random (but "fresh"), from requests built once.
--
-- Turns of TURN_MS go round the sides by the wall clock, the same in every
-- thread, so that every side runs in the same seconds as the others and
-- shares the machine's drift (its speed moves by 10 to 25 % within a
-- second on a shared machine; runs of each side a few seconds apart do not
-- share it). A turn's rate is the requests sent after its first SETTLE_MS:
-- wrk sends a request as the answer to the last one arrives, so those are
-- answers of this side alone, once the other side's last answers are in.
--
-- Prints "BENCH_JSON {...}" (figures.lua) with, in "sides", each side's
-- requests and its settled requests per second over its whole turns.

local ffi = require("ffi")
local figures = require("figures")
local visitors = require("visitors")

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *now);
]]
local CLOCK_MONOTONIC = 1
local now = ffi.new("bench_timespec")

local function now_us()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, now)
    return tonumber(now.tv_sec) * 1000000 + tonumber(now.tv_nsec) / 1000
end

setup = figures.setup

-- The requests of one side, built once.
local function side_requests(file, path, host, query, spread, header)
    local suffix = query ~= "-" and ("?" .. query) or ""
    local headers = {}
    for _, visitor in ipairs(spread == "spread" and visitors.list or { { ["User-Agent"] = visitors.browser } }) do
        local own = {}
        for name, value in pairs(visitor) do
            own[name] = value
        end
        if host ~= "-" then
            own["Host"] = host
        end
        if header ~= "-" then
            local name, value = header:match("^([^:]+):%s*(.*)$")
            own[name] = value
        end
        headers[#headers + 1] = own
    end
    local built = {}
    for line in io.lines(file) do
        for _, own in ipairs(headers) do
            built[#built + 1] = wrk.format("GET", path .. line .. suffix, own)
        end
    end
    return built
end

function init(args)
    turn_us = tonumber(args[1]) * 1000
    settle_us = tonumber(args[2]) * 1000
    thread_count = tonumber(args[3])
    wrk.headers["User-Agent"] = visitors.browser
    visitors.complete(wrk.headers)
    sides, fresh = {}, {}
    for first = 4, #args, 6 do
        sides[#sides + 1] = side_requests(args[first], args[first + 1], args[first + 2], args[first + 3],
            args[first + 4], args[first + 5])
        fresh[#sides] = args[first + 4] == "fresh"
    end
    side_count = #sides
    -- Keys of a fresh side asked for again (the file ran out), per thread.
    reused_keys = 0
    -- Requests sent per side, and settled requests per turn (by the turn's
    -- number since the clock's start: the same in every thread).
    sent = {}
    for side = 1, side_count do
        sent[side] = 0
    end
    settled = {}
    math.randomseed(os.time() + id * 7919)
end

function request()
    local t = now_us()
    local turn = math.floor(t / turn_us)
    local side = turn % side_count + 1
    if t - turn * turn_us >= settle_us then
        settled[turn] = (settled[turn] or 0) + 1
    end
    local built, nth = sides[side], sent[side]
    sent[side] = nth + 1
    if fresh[side] then
        local index, again = figures.fresh_index(nth, thread_count, #built)
        if again then
            reused_keys = reused_keys + 1
        end
        return built[index]
    end
    return built[math.random(#built)]
end

function done(summary, latency, requests)
    local first_thread = figures.threads[1]
    local count = first_thread:get("side_count")
    local turn_us, settle_us = first_thread:get("turn_us"), first_thread:get("settle_us")
    local per_turn, first, last = {}, nil, nil
    local sides = {}
    for side = 1, count do
        sides[side] = { requests = 0, settled = 0, turns = 0 }
    end
    for _, thread in ipairs(figures.threads) do
        for turn, n in pairs(thread:get("settled")) do
            per_turn[turn] = (per_turn[turn] or 0) + n
            first = (first == nil or turn < first) and turn or first
            last = (last == nil or turn > last) and turn or last
        end
        for side, n in ipairs(thread:get("sent")) do
            sides[side].requests = sides[side].requests + n
        end
    end
    -- The first and the last turn are cut by the run's start and end.
    for turn = first + 1, last - 1 do
        local side = sides[turn % count + 1]
        side.settled = side.settled + (per_turn[turn] or 0)
        side.turns = side.turns + 1
    end
    local parts = {}
    for _, side in ipairs(sides) do
        local seconds = side.turns * (turn_us - settle_us) / 1e6
        parts[#parts + 1] = string.format('{"requests": %d, "turns": %d, "rps": %.1f}', side.requests, side.turns,
            seconds > 0 and side.settled / seconds or 0)
    end
    figures.print(summary, latency, nil, figures.sum("reused_keys"), '"sides": [' .. table.concat(parts, ", ") .. "]")
end
