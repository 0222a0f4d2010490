-- Requests short links for `make bench`:
--   wrk ... -s links.lua <url> -- MODE KEYFILE THREADS [statuses] [PATH HOST QUERY]
-- MODE: "random" (uniform over the keys), "fresh" (each key once: every
-- request a cache miss), "zipf" (Zipf, s = 1.0, over the keys in file order).
-- "statuses" counts answers that are not redirects (3xx), at the cost of a
-- Lua call per answer; without it only wrk's own count of 4xx/5xx is kept.
-- PATH is what comes before each key ("/l/" when left out), HOST the Host
-- header sent instead of the URL's, QUERY a query string sent with every
-- key (without its "?"); "-" leaves HOST or QUERY out.
-- Prints one line "BENCH_JSON {...}" with the figures.

local figures = require("figures")

setup = figures.setup

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
    -- People's browsers: most clicks are theirs, and only people's clicks
    -- go through the whole count (per day, hour, minute, details, visitors)
    -- and make a link hot for warming.
    wrk.headers["User-Agent"] =
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    keys = {}
    for line in io.lines(file) do
        keys[#keys + 1] = path .. line .. query
    end
    n = #keys
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
    local index
    if mode == "fresh" then
        -- Threads take interleaved keys, so no key is asked for twice.
        index = id + counter * thread_count + 1
        counter = counter + 1
        if index > n then
            wrapped = wrapped + 1
            index = (index - 1) % n + 1
        end
    elseif mode == "zipf" then
        index = zipf_index()
    else
        index = math.random(n)
    end
    return wrk.format("GET", keys[index])
end

function done(summary, latency, requests)
    -- Every thread counts, or none: `counting` is the same in all.
    local counted = figures.threads[1]:get("counting")
    figures.print(summary, latency, counted and figures.sum("non_3xx") or nil, figures.sum("wrapped"))
end
