-- Requests short links for `make bench`:
--   wrk ... -s links.lua <url> -- MODE KEYFILE THREADS
-- MODE: "random" (uniform over the keys), "fresh" (each key once: every
-- request a cache miss), "zipf" (Zipf, s = 1.0, over the keys in file order).
-- Prints one line "BENCH_JSON {...}" with the figures.

local threads = {}

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

function init(args)
    mode, file, thread_count = args[1], args[2], tonumber(args[3])
    keys = {}
    for line in io.lines(file) do
        keys[#keys + 1] = "/l/" .. line
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
    local wraps = 0
    for _, thread in ipairs(threads) do
        wraps = wraps + (thread:get("wrapped") or 0)
    end
    local e = summary.errors
    io.write(string.format(
        'BENCH_JSON {"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, "p99_us": %d, "reused_keys": %d}\n',
        summary.requests, summary.duration,
        e.connect + e.read + e.write + e.timeout + e.status,
        latency:percentile(50), latency:percentile(99), wraps))
end
