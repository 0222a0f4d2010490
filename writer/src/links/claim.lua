-- KEYS[1]: the hash. KEYS[2]: the owner's index (a list of keys, oldest
-- first), or none in a Redis Cluster, where it lives in another slot and
-- the writer adds to it after. ARGV[1]: the value to store. ARGV[3]: the part of the key that
-- names the hash. ARGV[4]: '1' if a key already holding this very value
-- may be answered instead ('0' for a link with a click limit: its clicks
-- are its own); '2' the same, writing that value again, so that a WAIT
-- after this script covers the link (WAIT waits for its own connection's
-- last write, and the insert that stored the link may have been another
-- connection's). ARGV[5..]: candidate fields, shortest first.
local value = ARGV[1]
local reuse = ARGV[4] ~= '0'
for i = 5, #ARGV do
    local current = redis.call('HGET', KEYS[1], ARGV[i])
    if not current then
        redis.call('HSET', KEYS[1], ARGV[i], value)
        if KEYS[2] then redis.call('RPUSH', KEYS[2], ARGV[3] .. ARGV[i]) end
        return {i - 4, 1}
    elseif current == value and reuse then
        if ARGV[4] == '2' then
            redis.call('HSET', KEYS[1], ARGV[i], value)
        end
        return {i - 4, 0}
    end
end
return {0, 0}
