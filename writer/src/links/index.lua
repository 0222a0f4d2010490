-- KEYS[1]: an owner's list of keys. ARGV[1]: a key just claimed for it.
-- Looks among the list's last 1000 entries only: the key of a retried or
-- concurrent insert is there, and a long list is not read whole.
if redis.call('LPOS', KEYS[1], ARGV[1], 'RANK', -1, 'MAXLEN', 1000) then
    return 0
end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
