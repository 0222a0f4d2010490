local now = redis.call('TIME')
if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) > tonumber(ARGV[2]) then
    return {-1, 0}
end
local url = ARGV[1]
for i = 3, #ARGV do
    local current = redis.call('HGET', KEYS[1], ARGV[i])
    if not current then
        redis.call('HSET', KEYS[1], ARGV[i], url)
        return {i - 2, 1}
    elseif current == url then
        return {i - 2, 0}
    end
end
return {0, 0}
