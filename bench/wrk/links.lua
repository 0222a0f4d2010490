-- Requests short links for `make bench`:
--   wrk ... -s links.lua <url> -- MODE KEYFILE THREADS [statuses] [PATH HOST QUERY [spread]]
-- MODE: "random" (uniform over the keys), "fresh" (each key once: every
-- request a cache miss), "zipf" (Zipf, s = 1.0, over the keys in file order).
-- "statuses" counts answers that are not redirects (3xx), at the cost of a
-- Lua call per answer; without it only wrk's own count of 4xx/5xx is kept.
-- PATH is what comes before each key ("/l/" when left out), HOST the Host
-- header sent instead of the URL's, QUERY a query string sent with every
-- key (without its "?"); "-" leaves HOST or QUERY out. "spread" sends
-- each request as one of a few devices and languages (User-Agent and
-- Accept-Language), for links whose rules read them.
-- Prints one line "BENCH_JSON {...}" with the figures.

local figures = require("figures")

setup = figures.setup

local visitors = require("visitors")

-- The headers of a request: a visitor's when spread, wrk's own otherwise.
local function headers_of(visitor)
    if spread then
        return visitors.list[visitor]
    end
    return nil
end

function init(args)
    mode, file, thread_count = args[1], args[2], tonumber(args[3])
    non_3xx = 0
    counting = args[4] == "statuses"
    local path = args[5] or "/l/"
    if args[6] and args[6] ~= "-" then
        -- wrk.init set the URL's host before calling init.
        wrk.headers["Host"] = args[6]
    end
    local query = (args[7] and args[7] ~= "-") and ("?" .. args[7]) or ""
    if counting then
        -- Defined only when asked for: wrk parses headers for Lua only
        -- when a response function exists.
        function response(status)
            if status < 300 or status > 399 then
                non_3xx = non_3xx + 1
            end
        end
    end
    wrk.headers["User-Agent"] = visitors.browser
    spread = args[8] == "spread"
    visitors.complete(wrk.headers)
    keys = {}
    for line in io.lines(file) do
        keys[#keys + 1] = path .. line .. query
    end
    n = #keys
    built = {}
    built_count = 0
    if mode == "random" then
        -- Every key as each visitor (or as wrk's one browser): a uniform
        -- pick among them is a uniform key and a uniform visitor.
        for visitor = 1, spread and #visitors.list or 1 do
            for index = 1, n do
                built_count = built_count + 1
                built[built_count] = wrk.format("GET", keys[index], headers_of(visitor))
            end
        end
    end
    counter = 0
    wrapped = 0
    math.randomseed(os.time() + id * 7919)
    if mode == "zipf" then
        -- Cumulative weights of ranks 1..n with weight 1/rank.
        cdf = {}
        local total = 0
        for rank = 1, n do
            total = total + 1 / rank
            cdf[rank] = total
        end
        norm = total
    end
end

local function zipf_index()
    local target = math.random() * norm
    local low, high = 1, n
    while low < high do
        local mid = math.floor((low + high) / 2)
        if cdf[mid] < target then low = mid + 1 else high = mid end
    end
    return low
end

function request()
    if mode == "random" then
        -- Built in init: wrk shares the machine with the Varnish it
        -- measures, and building requests here made a longer one (a
        -- query, a device's headers) cost wrk more CPU, which the scenario
        -- compared was then charged for.
        return built[math.random(built_count)]
    end
    if mode == "fresh" then
        local index, again = figures.fresh_index(counter, thread_count, n)
        counter = counter + 1
        if again then
            wrapped = wrapped + 1
        end
        return wrk.format("GET", keys[index], headers_of(math.random(#visitors.list)))
    end
    -- Zipf: the hot keys' requests are kept once built.
    local index = zipf_index()
    local request = built[index]
    if request == nil then
        request = wrk.format("GET", keys[index], headers_of(math.random(#visitors.list)))
        built[index] = request
    end
    return request
end

function done(summary, latency, requests)
    -- Every thread counts, or none: `counting` is the same in all.
    local counted = figures.threads[1]:get("counting")
    figures.print(summary, latency, counted and figures.sum("non_3xx") or nil, figures.sum("wrapped"))
end
