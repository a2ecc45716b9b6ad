// Lua scripts of the redis SessionStore (redis-store.ts has the key schema). Each touches one key, KEYS[1], so
// it is atomic on its own and would run unchanged on a Redis Cluster slot. Each returns
// { flag, HGETALL of the session } so the caller gets the whole record back in the same round trip.
// Hash fields: h host backend id (absent = unbound) · a attained ms · cp critical path ms · ct context tokens
// · lm last migration ms (absent = never) · m migrations · v version.

/** ARGV: backend id, ttl ms, seed a, seed cp, seed ct. Sets h only if unbound (first writer wins). */
export const BIND_LUA = `
local k = KEYS[1]
local won = 0
if redis.call('EXISTS', k) == 0 then
  redis.call('HSET', k, 'a', ARGV[3], 'cp', ARGV[4], 'ct', ARGV[5], 'm', 0, 'v', 0)
end
local h = redis.call('HGET', k, 'h')
if not h or h == '' then
  redis.call('HSET', k, 'h', ARGV[1])
  redis.call('HINCRBY', k, 'v', 1)
  won = 1
end
redis.call('PEXPIRE', k, ARGV[2])
return {won, redis.call('HGETALL', k)}
`;

/** ARGV: service ms, critical path ms ('' = none), context tokens ('' = none), ttl ms. */
export const ADD_SERVICE_LUA = `
local k = KEYS[1]
redis.call('HINCRBYFLOAT', k, 'a', ARGV[1])
if ARGV[2] ~= '' then
  local cp = tonumber(redis.call('HGET', k, 'cp') or '0') or 0
  if tonumber(ARGV[2]) > cp then redis.call('HSET', k, 'cp', ARGV[2]) end
end
if ARGV[3] ~= '' then redis.call('HSET', k, 'ct', ARGV[3]) end
redis.call('HINCRBY', k, 'v', 1)
redis.call('PEXPIRE', k, ARGV[4])
return {1, redis.call('HGETALL', k)}
`;

/**
 * ARGV: expected host ('' = unbound), next host ('' = unbind), now, migration (1/0), ttl ms.
 * Won iff the host is the expected one; a change bumps v, and a migration sets lm and m.
 */
export const CAS_HOST_LUA = `
local k = KEYS[1]
local exists = redis.call('EXISTS', k) == 1
local h = redis.call('HGET', k, 'h') or ''
if h ~= ARGV[1] then
  if exists then redis.call('PEXPIRE', k, ARGV[5]) end
  return {0, redis.call('HGETALL', k)}
end
if not exists and ARGV[2] == '' then return {1, {}} end
if ARGV[2] ~= h then
  if ARGV[2] == '' then redis.call('HDEL', k, 'h') else redis.call('HSET', k, 'h', ARGV[2]) end
  if ARGV[4] == '1' then
    redis.call('HSET', k, 'lm', ARGV[3])
    redis.call('HINCRBY', k, 'm', 1)
  end
  redis.call('HINCRBY', k, 'v', 1)
end
redis.call('PEXPIRE', k, ARGV[5])
return {1, redis.call('HGETALL', k)}
`;

/** A context and the time it has left (ms), in one reply: { value or nil, pttl }. */
export const GET_CONTEXT_LUA = `
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`;
