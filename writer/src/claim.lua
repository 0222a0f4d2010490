-- KEYS[1]: the hash. KEYS[2]: the owner's index (a list of keys, oldest
-- first). ARGV[1]: the value to store. ARGV[3]: the part of the key that
-- names the hash. ARGV[4..]: candidate fields, shortest first.
local value = ARGV[1]
for i = 4, #ARGV do
    local current = redis.call('HGET', KEYS[1], ARGV[i])
    if not current then
        redis.call('HSET', KEYS[1], ARGV[i], value)
        redis.call('RPUSH', KEYS[2], ARGV[3] .. ARGV[i])
        return {i - 3, 1}
    elseif current == value then
        return {i - 3, 0}
    end
end
return {0, 0}
