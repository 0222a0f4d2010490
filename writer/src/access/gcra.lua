-- The rate limit many writers share: GCRA (the generic cell rate
-- algorithm), one key per client holding its theoretical arrival time
-- (TAT) in milliseconds of Redis's clock, so writers' clocks never matter.
--
-- KEYS[1]  the client's key
-- ARGV[1]  emission interval: milliseconds per link on average
-- ARGV[2]  burst: links allowed at once
-- ARGV[3]  links wanted now: 1, or a bulk insert's rows
--
-- Answers {admitted, wait}: how many of the links wanted are allowed (and
-- counted), the first ones, and the milliseconds until the next would be
-- (0 when all were).
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local wanted = tonumber(ARGV[3] or '1')
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
    tat = now
end
-- The k-th link is allowed once tat + k * interval - burst * interval <= now.
local room = math.floor((now - tat + interval * burst) / interval)
local admitted = math.max(0, math.min(wanted, room))
if admitted > 0 then
    local new_tat = tat + admitted * interval
    redis.call('SET', KEYS[1], new_tat, 'PX', new_tat - now)
end
if admitted == wanted then
    return {admitted, 0}
end
return {admitted, tat + (admitted + 1) * interval - interval * burst - now}
