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

-- Devices and languages as a link's visitors send them: an iPhone, Android
-- phones, desktops of several languages. wrk.format sends the headers it
-- is given instead of wrk.headers (Host aside): init completes each table
-- with what the others send.
local visitors = {
    { ["User-Agent"] = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
        .. "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", ["Accept-Language"] = "en-US,en;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Mobile Safari/537.36", ["Accept-Language"] = "de-DE,de;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Linux; Android 14; SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Mobile Safari/537.36", ["Accept-Language"] = "fr-FR,fr;q=0.9" },
    { ["Accept-Language"] = "fr-FR,fr;q=0.9,en;q=0.5" },
    { ["Accept-Language"] = "en-GB,en;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Safari/537.36", ["Accept-Language"] = "de-DE,de;q=0.9,en;q=0.8" },
    { ["User-Agent"] = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        .. "Version/17.4 Safari/605.1.15", ["Accept-Language"] = "nl-NL,nl;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
        .. "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", ["Accept-Language"] = "fr-CA" },
}

-- The headers of a request: a visitor's when spread, wrk's own otherwise.
local function headers_of(visitor)
    if spread then
        return visitors[visitor]
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
    -- People's browsers: most clicks are theirs, and only people's clicks
    -- go through the whole count (per day, hour, minute, details, visitors)
    -- and make a link hot for warming.
    wrk.headers["User-Agent"] =
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    spread = args[8] == "spread"
    for _, headers in ipairs(visitors) do
        for name, value in pairs(wrk.headers) do
            if headers[name] == nil then
                headers[name] = value
            end
        end
    end
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
        for visitor = 1, spread and #visitors or 1 do
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
    local index
    if mode == "fresh" then
        -- Threads take interleaved keys, so no key is asked for twice.
        index = id + counter * thread_count + 1
        counter = counter + 1
        if index > n then
            wrapped = wrapped + 1
            index = (index - 1) % n + 1
        end
        return wrk.format("GET", keys[index], headers_of(math.random(#visitors)))
    end
    -- Zipf: the hot keys' requests are kept once built.
    index = zipf_index()
    local request = built[index]
    if request == nil then
        request = wrk.format("GET", keys[index], headers_of(math.random(#visitors)))
        built[index] = request
    end
    return request
end

function done(summary, latency, requests)
    -- Every thread counts, or none: `counting` is the same in all.
    local counted = figures.threads[1]:get("counting")
    figures.print(summary, latency, counted and figures.sum("non_3xx") or nil, figures.sum("wrapped"))
end
