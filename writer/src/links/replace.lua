-- KEYS[1]: the hash. ARGV[1]: the new value. ARGV[3]: the field. ARGV[4]:
-- the value the change was based on: if the field holds anything else, a
-- concurrent change came first, and this one stores nothing.
if redis.call('HGET', KEYS[1], ARGV[3]) ~= ARGV[4] then
    return {0, 0}
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1])
return {1, 0}
