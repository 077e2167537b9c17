"""Every Lua script kindling runs on Valkey, each with the keys and arguments it takes.

A script runs atomically on the server: nothing else runs between its reads and writes, which
is what each of these needs (a check and a change that must not be split, or a move that must
never leave a job in neither place). They are run by digest (``register_script``:
:class:`kindling.drivers.valkey.commands.Script`), queued on a pipeline where they share a round trip.

Every key a script touches is passed in ``KEYS`` (named by :mod:`kindling.core.valkey.keys`); a
script builds no key name itself. Statuses in the scripts are :mod:`kindling.core.status`'s.

The stream: :data:`MOVE_DUE` (the consumer, every round: due delayed jobs onto the stream),
:data:`HANDSHAKE` (the Lambda drain before it stops: give up its kick flag, or take it back
if work arrived), :data:`EXTEND` (the heartbeat: re-claim a running batch's entries),
:data:`FORGET` (a consumer as it stops: remove consumers that hold nothing). The result
store: :data:`FORWARD_ONLY` (a record only ever moves forward), :data:`COUNT_MEMBER`,
:data:`CLAIM_CHORD`, :data:`MARK_CHORD_SENT`, :data:`REOPEN_CHORD` (chords). The operator
tools: :data:`REVIVE` (``kindling jobs retry --valkey``: a dead record becomes ``queued``).

No imports: the strings cost nothing until a script is registered.
"""

from __future__ import annotations

# -- the stream ---------------------------------------------------------------------------

# The body of the move of due delayed jobs, shared by MOVE_DUE and HANDSHAKE.
# KEYS[1] the scheduled set          KEYS[2] the stream
# ARGV[1] now (epoch ms)             ARGV[2] most jobs to move       ARGV[3] the job field
# Leaves `moved` (count) and `next_due` (score of the earliest job still waiting, or -1) in
# locals. A signed job's member is "<signature>\n<envelope>" (kindling.shared.valkey.scheduled.member):
# its signature goes back beside the body as the entry's 'sig' (kindling.core.valkey.keys.SIG_FIELD).
# Scripts are replicated by their effects (the default since Redis 5), so XADD with an id of
# "*" is allowed; replicate_commands is for older servers.
MOVE_BODY = """
if redis.replicate_commands then pcall(redis.replicate_commands) end
local now = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  local cut = string.find(job, string.char(10), 1, true)
  if string.byte(job, 1) ~= 123 and cut then
    -- "<signature> newline <envelope>": a signed job, whose signature goes back beside its body
    redis.call('XADD', KEYS[2], '*', ARGV[3], string.sub(job, cut + 1), 'sig', string.sub(job, 1, cut - 1))
  else
    redis.call('XADD', KEYS[2], '*', ARGV[3], job)
  end
  redis.call('ZREM', KEYS[1], job)
end
local moved = #due
local next_due = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then next_due = tonumber(first[2]) end
"""

MOVE_DUE = MOVE_BODY + "return {moved, next_due}\n"
"""KEYS and ARGV: :data:`MOVE_BODY`'s. Returns ``[moved, next_due]`` (``next_due`` -1 when
nothing waits)."""

# The drain's handshake before it stops (kindling.shared.valkey.kick: why no job is stranded): delete
# the flag, look again, and take the flag back if there is work after all.
# KEYS[1] the scheduled set          KEYS[2] the stream              KEYS[3] the flag
# ARGV[1] now (epoch ms)             ARGV[2] move limit              ARGV[3] the job field
# ARGV[4] group                      ARGV[5] this consumer           ARGV[6] visibility ms
# ARGV[7] stale ms                   ARGV[8] horizon ms              ARGV[9] the flag's ttl ms
# Returns {kept, work, soonest}: whether the flag is held again, whether there is work now,
# and the time (epoch ms) the earliest waiting work is due (-1: none).
HANDSHAKE = MOVE_BODY + """
local function after(a, b)
  local am, as = string.match(a, '(%d+)-(%d+)')
  local bm, bs = string.match(b, '(%d+)-(%d+)')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end
redis.call('DEL', KEYS[3])
local group, me = ARGV[4], ARGV[5]
local visibility, stale, horizon = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local work = 0
local soonest = next_due
-- entries the group was never given: the stream's last entry is past its last delivered id
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 then
  local delivered = nil
  local groups = redis.pcall('XINFO', 'GROUPS', KEYS[2])
  if type(groups) == 'table' and not groups.err then
    for _, g in ipairs(groups) do
      local name, id
      for i = 1, #g, 2 do
        if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then id = g[i + 1] end
      end
      if name == group then delivered = id end
    end
  end
  if delivered == nil or after(last[1][1], delivered) then work = 1 end
end
-- pending entries: reclaimable now, or handed back (ours, or not touched by a heartbeat lately)
if work == 0 then
  local pending = redis.pcall('XPENDING', KEYS[2], group, '-', '+', 1000)
  if type(pending) == 'table' and not pending.err then
    for _, p in ipairs(pending) do
      local idle = tonumber(p[3])
      if idle >= visibility then
        work = 1
        break
      end
      if p[2] == me or idle >= stale then
        local at = now + visibility - idle
        if soonest == -1 or at < soonest then soonest = at end
      end
    end
  end
end
local kept = 0
if work == 1 or (soonest ~= -1 and soonest - now <= horizon) then
  if redis.call('SET', KEYS[3], '1', 'NX', 'PX', tonumber(ARGV[9])) then kept = 1 end
end
return {kept, work, soonest}
"""

# A running batch's entries claimed again (kindling.triggers.valkey.heartbeat): only those still
# pending for this consumer, so one another consumer has taken over is not taken back.
# KEYS[1] the stream
# ARGV[1] group                      ARGV[2] consumer                ARGV[3..] entry ids
# Returns how many were claimed again.
EXTEND = """
local mine = {}
for i = 3, #ARGV do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2]) > 0 then
    mine[#mine + 1] = ARGV[i]
  end
end
local claimed = 0
for first = 1, #mine, 500 do
  local args = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], '0'}
  for j = first, math.min(first + 499, #mine) do args[#args + 1] = mine[j] end
  args[#args + 1] = 'JUSTID'
  claimed = claimed + #redis.call(unpack(args))
end
return claimed
"""

# This consumer and those idle past stale ms removed from the group, if they hold nothing:
# checked and removed in one step, so a consumer that reads meanwhile cannot lose its entries
# (DELCONSUMER drops a consumer's pending entries).
# KEYS[1] the stream
# ARGV[1] group                      ARGV[2] this consumer           ARGV[3] stale ms
# Returns how many consumers were removed.
FORGET = """
local info = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if type(info) ~= 'table' or info.err then return 0 end
local removed = 0
for _, c in ipairs(info) do
  local name, pending, idle
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = tonumber(c[i + 1])
    elseif c[i] == 'idle' then idle = tonumber(c[i + 1]) end
  end
  if pending == 0 and (name == ARGV[2] or idle >= tonumber(ARGV[3])) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
"""

# -- the result store (kindling.stores.valkey) -------------------------------------------

# Set a record unless the stored one may not be replaced (kindling.core.status.may_replace).
# KEYS[1] the record                 KEYS[2] its done list
# ARGV[1] record JSON                ARGV[2] ttl s                   ARGV[3] final (1/0)
# ARGV[4] attempts                   ARGV[5] is-failed (1/0)
# ARGV[6] generation read (0: not checked)                           ARGV[7..] statuses it may replace
# Returns false when set, else the stored status, or 'newer generation' if the stored record
# is of a newer generation than the one read.
FORWARD_ONLY = """
local old = redis.call('GET', KEYS[1])
if old then
  local rec = cjson.decode(old)
  local generation = tonumber(ARGV[6])
  local stored = tonumber(rec.generation) or 1
  if generation > 0 and stored ~= generation then
    if stored > generation then return 'newer generation' end
    return rec.status
  end
  local ok = false
  for i = 7, #ARGV do
    if rec.status == ARGV[i] then ok = true end
  end
  if ARGV[5] == '1' and rec.status == 'failed' and (tonumber(rec.attempts) or 0) <= tonumber(ARGV[4]) then
    ok = true
  end
  if not ok then return rec.status end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
if ARGV[3] == '1' then
  redis.call('RPUSH', KEYS[2], 1)
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return false
"""

# A chord member's count (kindling.engine.followups), as DynamoDB's one UpdateItem does it: the
# index joins ``done`` (and ``dead`` unless it succeeded: the chord is then ``dead`` for
# good, its first error kept); counting twice changes nothing.
# KEYS[1] the chord record
# ARGV[1] chord id                   ARGV[2] index                   ARGV[3] size
# ARGV[4] at ms                      ARGV[5] ok (1/0)                ARGV[6] error JSON
# ARGV[7] ttl s
# Returns the record as it was (false: none).
COUNT_MEMBER = """
local raw = redis.call('GET', KEYS[1])
local rec
if raw then rec = cjson.decode(raw) else rec = {id = ARGV[1]} end
local function add(list, v)
  list = list or {}
  for _, x in ipairs(list) do if x == v then return list end end
  list[#list + 1] = v
  return list
end
rec.kind = 'chord'
rec.done = add(rec.done, ARGV[2])
rec.size = tonumber(ARGV[3])
rec.updated_at = tonumber(ARGV[4])
if ARGV[5] == '1' then
  rec.status = rec.status or 'waiting'
else
  rec.dead = add(rec.dead, ARGV[2])
  rec.status = 'dead'
  rec.error = rec.error or cjson.decode(ARGV[6])
end
rec.expires_at = math.floor(tonumber(ARGV[4]) / 1000) + tonumber(ARGV[7])
redis.call('SET', KEYS[1], cjson.encode(rec), 'EX', ARGV[7])
return raw or false
"""

# The chord claimed for its callback, before the callback is sent: ``waiting`` becomes
# ``completed`` naming it, so of every delivery that finds the chord complete one claims it.
# With a claim time it takes over the claim made then instead, if its callback was never
# marked sent.
# KEYS[1] the chord record
# ARGV[1] at ms                      ARGV[2] callback id ('' for none)
# ARGV[3] claim time ('' for none)
# Returns 1 if claimed here, else 0.
CLAIM_CHORD = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local rec = cjson.decode(raw)
if ARGV[3] == '' then
  if rec.status ~= 'waiting' then return 0 end
elseif rec.status ~= 'completed' or tonumber(rec.completed_at) ~= tonumber(ARGV[3]) or rec.sent_at then
  return 0
end
rec.status = 'completed'
rec.completed_at = tonumber(ARGV[1])
if ARGV[2] ~= '' then rec.callback = ARGV[2] end
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return 1
"""

# A claimed chord's callback was sent.
# KEYS[1] the chord record
# ARGV[1] at ms
# Returns 1 if marked, 0 if the chord is not ``completed``.
MARK_CHORD_SENT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local rec = cjson.decode(raw)
if rec.status ~= 'completed' then return 0 end
rec.sent_at = tonumber(ARGV[1])
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return 1
"""

# A member sent again leaves the chord's dead members; with none left the chord is
# ``waiting`` again (kindling.tools.ops.revive.reopen_chord).
# KEYS[1] the chord record
# ARGV[1] index
# Returns 1 if the chord is open again, else 0.
REOPEN_CHORD = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local rec = cjson.decode(raw)
local open = 0
if rec.dead then
  local left = {}
  for _, x in ipairs(rec.dead) do if x ~= ARGV[1] then left[#left + 1] = x end end
  if #left == 0 then rec.dead = nil else rec.dead = left end
end
if rec.dead == nil and rec.status == 'dead' then
  rec.status = 'waiting'
  rec.error = nil
  open = 1
end
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return open
"""

# -- operator tools (kindling.tools.ops.dead_stream) --------------------------------------------

# A dead record replaced by a ``queued`` one of the next generation, only if it is still the
# dead one read, with the job's revive ledger.
# KEYS[1] the record                 KEYS[2] the revive ledger
# ARGV[1] finished_at as read        ARGV[2] queued record JSON      ARGV[3] ledger JSON
# ARGV[4] ttl s
# Returns false when replaced, else the stored status ('none': no record).
REVIVE = """
local old = redis.call('GET', KEYS[1])
if not old then return 'none' end
local rec = cjson.decode(old)
if rec.status ~= 'dead' or tonumber(rec.finished_at) ~= tonumber(ARGV[1]) then return rec.status end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4])
redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[4])
return false
"""

TAKE = """
-- KEYS[1]: a rate-limited task's count for one window; ARGV: want, limit, ttl seconds.
-- Takes what the window has left, up to want, and returns it (kindling.core.ratelimit).
local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
local granted = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - taken)
if granted <= 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], granted)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return granted
"""

GIVE_BACK = """
-- KEYS[1]: a rate-limited task's count for one window; ARGV: runs to give back.
-- Runs taken for jobs that never started go back to the window (kindling.core.ratelimit), only
-- while at least that many are taken (as the DynamoDB store's condition): else nothing changes.
local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
local back = tonumber(ARGV[1])
if back <= 0 or taken < back then
  return 0
end
redis.call('DECRBY', KEYS[1], back)
return back
"""
