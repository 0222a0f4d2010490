-- Every write script starts here. ARGV[2] is the deadline, in milliseconds
-- of Redis's clock: past it the writer has told its client 503, so the
-- script must store nothing.
local now = redis.call('TIME')
if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) > tonumber(ARGV[2]) then
    return {-1, 0}
end
