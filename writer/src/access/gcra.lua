-- The rate limit many writers share: GCRA (the generic cell rate
-- algorithm), one key per client holding its theoretical arrival time
-- (TAT) in milliseconds of Redis's clock, so writers' clocks never matter.
--
-- KEYS[1]  the client's key
-- ARGV[1]  emission interval: milliseconds per link on average
-- ARGV[2]  burst: links allowed at once
--
-- Answers 0 when the link is allowed (and counts it), or else the
-- milliseconds until the next one is.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
    tat = now
end
local next_tat = tat + interval
local allowed_at = next_tat - interval * burst
if allowed_at > now then
    return allowed_at - now
end
redis.call('SET', KEYS[1], next_tat, 'PX', next_tat - now)
return 0
