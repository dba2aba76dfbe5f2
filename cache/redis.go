package cache

// The Redis store keeps each session in three keys that share the hash tag
// {<principal>:<id>} (both escaped: every byte outside [A-Za-z0-9._-],
// ':' and braces included, becomes %XX), so a Cluster keeps them in one slot:
//
//	sb:{<principal>:<id>}:msgs  list, one JSON message (OpenAI shape) per element
//	sb:{<principal>:<id>}:meta  hash: agent (active agent), version (counts writes),
//	                            epoch (random, new when the session starts or a
//	                            filter replaces the transcript), len, write (last write id),
//	                            updated (unix ms of the last write)
//	sb:{<principal>:<id>}:lock  the run's lock: a random token, SET NX PX lock_lease
//
// Every operation is one round trip (a Lua script). A write checks the lock
// token first (a run that lost its lease writes nothing), appends its
// messages (or replaces the list), bumps version and refreshes session_ttl
// on msgs and meta; a run's last write also deletes the lock, so that a
// turn costs two round trips (acquire, save) rather than three. The
// principal's session index (redisindex.go) is written in the save's round
// trip. Each
// gateway keeps an LRU of the transcripts it last saw and sends Redis its
// cached (epoch, length): Redis answers with only the newer messages, so a
// turn's cost does not grow with the conversation, and a write by another
// gateway is still seen.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Redis is the Redis session store, shared by every gateway that points at
// the same Redis. It is safe for concurrent use.
type Redis struct {
	opts    Options
	client  redis.UniversalClient
	scripts scripts
	cache   *transcripts
	batch   *batcher // the session commands' pipelines (batch.go)

	// orphans feeds sweep the locks that failed commands may leave behind.
	orphans chan orphan
	done    chan struct{}
	stop    sync.Once
	swept   sync.WaitGroup
}

var _ runtime.Store = (*Redis)(nil)

// NewRedis returns a Redis store for opts.URL, one of:
//
//	redis://[[user]:password@]host[:6379][/db][?option=value...]
//	rediss://...                      the same over TLS
//	unix://[[user]:password@]/path/to/redis.sock[?db=N]
//	redis-sentinel://[[user]:password@]host1[:26379],host2[:26379]/[db]?master=NAME[&sentinel_username=U&sentinel_password=P]
//	rediss-sentinel://...             the same over TLS
//	redis-cluster://[[user]:password@]host1[:6379],host2[:6379][?option=value...]
//	rediss-cluster://...              the same over TLS
//
// redis, rediss and unix URLs are read by go-redis's ParseURL and accept its
// options (dial_timeout, pool_size, ...). In sentinel and cluster URLs the
// user and password are the Redis servers' (not the sentinels'), and the
// options are master (sentinel, required), sentinel_username and
// sentinel_password (sentinel), client_name and pool_size (both).
//
// Timeouts not set in the URL follow opts.Timeout, so that a dead Redis
// fails fast; the connection pool reconnects by itself when Redis returns.
// NewRedis does not wait for Redis to answer (use Ping): a gateway may start
// before its Redis. ctx is reserved for setup work and currently unused.
func NewRedis(ctx context.Context, opts Options) (*Redis, error) {
	opts.init()
	uo, err := universalOptions(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("open redis store: %w", err)
	}
	tune(uo, opts.Timeout)
	if opts.Log != nil {
		// go-redis logs through one logger for the process.
		redis.SetLogger(redisLog{opts.Log})
	}
	client := redis.NewUniversalClient(uo)
	if cc, ok := client.(*redis.ClusterClient); ok {
		cc.AddHook(reloadOnFailure{cluster: cc})
	}
	if opts.TracerProvider != nil {
		err := redisotel.InstrumentTracing(client,
			redisotel.WithTracerProvider(opts.TracerProvider),
			// Arguments hold transcripts: they stay off spans.
			redisotel.WithDBStatement(false),
			redisotel.WithCallerEnabled(false))
		if err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("open redis store: trace: %w", err)
		}
	}
	s := &Redis{opts: opts, client: client, scripts: newScripts(), cache: newTranscripts(opts.CacheEntries),
		batch:   newBatcher(client, opts.Timeout, uo.PoolSize),
		orphans: make(chan orphan, maxOrphans), done: make(chan struct{})}
	s.swept.Go(s.sweep)
	return s, nil
}

// bound returns ctx limited to the store timeout.
func (s *Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// fail wraps a Redis error: the caller's own cancellation as such, anything
// else as ErrStoreUnavailable. The cause is kept as text, not wrapped, so
// that the store's own timeout never reads as the caller's deadline.
func fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", op, cerr)
	}
	return fmt.Errorf("%s: %w: %v", op, runtime.ErrStoreUnavailable, err)
}

// failSession is fail for an operation on key's records, which may also
// find them damaged.
func failSession(ctx context.Context, op string, key runtime.SessionKey, err error) error {
	if why := damage(err); why != "" && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", op, &runtime.SessionCorruptError{ID: key.ID, Reason: why})
	}
	return fail(ctx, op, err)
}

// corruptMark starts the error a script returns for damaged records.
const corruptMark = "SBCORRUPT "

// damage says how a session's records are damaged when Redis refused a
// script for what it found in them (a key of the wrong type, a version
// that is not a number), and is empty for any other failure: those are
// the store being unreachable, and may pass.
func damage(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGTYPE"):
		return "one of its keys holds the wrong type of value"
	case strings.Contains(msg, "hash value is not an integer"):
		return "its version is not a number"
	}
	// What the scripts themselves find damaged (scripts.go).
	if _, why, ok := strings.Cut(msg, corruptMark); ok {
		return why
	}
	return ""
}

// A run calls Acquire, Save and Release on the goroutine that serves its
// request, and, for a stream, reads the stream on that goroutine after
// them. go-redis goes about 3 KB deep (its hooks, the pool, the reply's
// reader), which from a save inside the run loop is past the 7 KB that
// keeps a goroutine's stack at 8 KB: one save, and the stream held 16 KB
// of stack to its end (issue 22). So they run aside (freshstack), on a
// goroutine of their own: a few microseconds (a goroutine's start and its
// stack's growth) against a round trip.

// Acquire takes key's lock and loads its state.
func (s *Redis) Acquire(ctx context.Context, key runtime.SessionKey) (sess *runtime.Session, lease runtime.Lease, err error) {
	freshstack.Run(func() { sess, lease, err = s.acquire(ctx, key) })
	return sess, lease, err
}

func (s *Redis) acquire(ctx context.Context, key runtime.SessionKey) (*runtime.Session, runtime.Lease, error) {
	const op = "acquire session"
	k := keysFor(key)
	base := s.cache.get(k.tag)
	epoch, have := cached(base)
	token := rand.Text()
	bctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := s.script(bctx, s.scripts.acquire, k.list(), token, s.opts.LockLease.Milliseconds(), epoch, have).Slice()
	if err != nil {
		// Redis may still run the command it did not answer in time, and
		// lock the session for a run that will never come.
		s.abandon(k.lock, token)
		return nil, runtime.Lease{}, failSession(ctx, op, key, err)
	}
	if ok, err := reply(r).ok(); err != nil {
		return nil, runtime.Lease{}, fmt.Errorf("%s: %w", op, err)
	} else if !ok {
		return nil, runtime.Lease{}, fmt.Errorf("%s: %w", op, runtime.ErrBusy)
	}
	lease := runtime.Lease{Token: token, TTL: s.opts.LockLease}
	if len(r) == 1 {
		return &runtime.Session{}, lease, nil
	}
	sess, err := s.assemble(key, k.tag, base, r)
	if err != nil {
		// Do not keep a session locked that this run cannot use.
		_ = s.release(context.WithoutCancel(ctx), key, lease)
		return nil, runtime.Lease{}, fmt.Errorf("%s: %w", op, err)
	}
	return sess, lease, nil
}

// Load reads key's state without locking it.
func (s *Redis) Load(ctx context.Context, key runtime.SessionKey) (*runtime.Session, error) {
	const op = "load session"
	k := keysFor(key)
	base := s.cache.get(k.tag)
	epoch, have := cached(base)
	bctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := s.script(bctx, s.scripts.load, k.list(), epoch, have).Slice()
	if err != nil {
		return nil, failSession(ctx, op, key, err)
	}
	if ok, err := reply(r).ok(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	} else if !ok {
		return nil, fmt.Errorf("%s: %w", op, runtime.ErrNotFound)
	}
	sess, err := s.assemble(key, k.tag, base, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return sess, nil
}

// cached returns what the scripts need of a cached transcript.
func cached(t *transcript) (epoch string, have int) {
	if t == nil {
		return "", 0
	}
	return t.epoch, len(t.msgs)
}

// assemble rebuilds a session from a read reply {1, agent, version, epoch,
// len, from, {messages from `from`}} and base, the transcript whose epoch and
// count the read sent, then caches it.
func (s *Redis) assemble(key runtime.SessionKey, tag string, base *transcript, r reply) (*runtime.Session, error) {
	agent, err1 := r.str(1)
	stored, err2 := r.str(2)
	epoch, err3 := r.str(3)
	n, err4 := r.int(4)
	from, err5 := r.int(5)
	raw, err6 := r.list(6)
	rawApprovals, err7 := r.str(7)
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return nil, fmt.Errorf("%w: %v", runtime.ErrStoreUnavailable, err)
	}
	version, err := strconv.ParseInt(stored, 10, 64)
	if err != nil {
		return nil, &runtime.SessionCorruptError{ID: key.ID, Reason: fmt.Sprintf("its version %q is not a number", stored)}
	}
	_, have := cached(base)
	if from != 0 && from != int64(have) || from+int64(len(raw)) != n {
		return nil, fmt.Errorf("%w: read %d messages from %d of %d with %d cached",
			runtime.ErrStoreUnavailable, len(raw), from, n, have)
	}
	tail, err := decodeMessages(raw)
	if err != nil {
		return nil, &runtime.SessionCorruptError{ID: key.ID, Reason: err.Error()}
	}
	msgs := tail // what a disabled cache leaves
	s.cache.update(tag, func(cur *transcript) *transcript {
		if from != 0 {
			msgs = extend(cur, base, tail)
		}
		if cur != nil && cur != base && cur.epoch == epoch && cur.version > version {
			// A write of this process landed while we read: keep the newer.
			return cur
		}
		return &transcript{epoch: epoch, version: version, msgs: msgs}
	})
	// The cached transcript is never written in place (see extend): the
	// session shares it.
	sess := &runtime.Session{Messages: slices.Clip(msgs), ActiveAgent: agent, Version: version}
	if rawApprovals != "" {
		if err := json.Unmarshal([]byte(rawApprovals), &sess.Approvals); err != nil {
			return nil, &runtime.SessionCorruptError{ID: key.ID, Reason: "its approvals are not JSON"}
		}
	}
	return sess, nil
}

// decodeMessages decodes a script's list of JSON messages.
func decodeMessages(raw []any) ([]runtime.Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	msgs := make([]runtime.Message, len(raw))
	for i, v := range raw {
		b, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("message %d is %T, not a string", i, v)
		}
		if err := json.Unmarshal([]byte(b), &msgs[i]); err != nil {
			return nil, fmt.Errorf("message %d is not a JSON message", i)
		}
	}
	return msgs, nil
}

// Save writes w under lease in one round trip and returns the new version;
// with w.Release the same round trip then gives the lock back.
func (s *Redis) Save(ctx context.Context, key runtime.SessionKey, lease runtime.Lease, w runtime.Write) (version int64, err error) {
	freshstack.Run(func() { version, err = s.save(ctx, key, lease, w) })
	return version, err
}

func (s *Redis) save(ctx context.Context, key runtime.SessionKey, lease runtime.Lease, w runtime.Write) (int64, error) {
	const op = "save session"
	k := keysFor(key)
	now := time.Now()
	args, err := s.saveArgs(lease, w, now)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	raw, err := s.runSave(bctx, key, args, now)
	if err != nil {
		return 0, failSession(ctx, op, key, err)
	}
	r := reply(raw)
	if status, err := r.int(0); err != nil {
		return 0, fmt.Errorf("%s: %w: %v", op, runtime.ErrStoreUnavailable, err)
	} else if status == 2 {
		size, _ := r.int(1)
		return 0, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", op, runtime.ErrSessionTooLarge, size, s.opts.MaxSessionBytes)
	} else if status != 1 {
		return 0, fmt.Errorf("%s: %w", op, runtime.ErrLeaseLost)
	}
	version, err1 := r.int(1)
	epoch, err2 := r.str(2)
	from, err3 := r.int(4)
	if err := errors.Join(err1, err2, err3); err != nil {
		// The write happened, but what this process knew of it is gone.
		s.cache.remove(k.tag)
		return 0, fmt.Errorf("%s: %w: %v", op, runtime.ErrStoreUnavailable, err)
	}
	s.cache.update(k.tag, func(cur *transcript) *transcript {
		switch {
		case from == 0:
			return &transcript{epoch: epoch, version: version, msgs: cloneMessages(w.Messages)}
		case cur != nil && cur.epoch == epoch && int64(len(cur.msgs)) == from:
			return &transcript{epoch: epoch, version: version, msgs: extend(cur, cur, cloneMessages(w.Messages))}
		default:
			return nil // this process missed a write; the next read fetches all
		}
	})
	return version, nil
}

// saveArgs returns luaSave's ARGV for w written at now, with a fresh epoch
// and write id.
func (s *Redis) saveArgs(lease runtime.Lease, w runtime.Write, now time.Time) ([]any, error) {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	var approvals []byte
	if w.SetApprovals {
		b, err := json.Marshal(w.Approvals)
		if err != nil {
			return nil, fmt.Errorf("encode approvals: %w", err)
		}
		approvals = b
	}
	args := make([]any, 0, 11+len(w.Messages))
	args = append(args, lease.Token, s.opts.SessionTTL.Milliseconds(), flag(w.Replace), w.ActiveAgent,
		rand.Text(), rand.Text(), flag(w.Release), s.opts.MaxSessionBytes, flag(w.SetApprovals), approvals,
		now.UnixMilli())
	for i := range w.Messages {
		b, err := json.Marshal(w.Messages[i])
		if err != nil {
			return nil, fmt.Errorf("encode message %d: %w", i, err)
		}
		args = append(args, b)
	}
	return args, nil
}

// Renew extends lease by the store's lock lease.
func (s *Redis) Renew(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	const op = "renew session lease"
	bctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.script(bctx, s.scripts.renew, []string{keysFor(key).lock}, lease.Token, s.opts.LockLease.Milliseconds()).Int64()
	if err != nil {
		return fail(ctx, op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, runtime.ErrLeaseLost)
	}
	return nil
}

// Release gives key's lock back if lease still holds it.
func (s *Redis) Release(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) (err error) {
	freshstack.Run(func() { err = s.release(ctx, key, lease) })
	return err
}

func (s *Redis) release(ctx context.Context, key runtime.SessionKey, lease runtime.Lease) error {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.script(bctx, s.scripts.release, []string{keysFor(key).lock}, lease.Token).Err(); err != nil {
		s.abandon(keysFor(key).lock, lease.Token)
		return fail(ctx, "release session", err)
	}
	return nil
}

// Delete removes key's keys, its lock included, its entry in the session
// index, and this process's cached transcript. A run that held the lock
// then fails its next write with ErrLeaseLost.
func (s *Redis) Delete(ctx context.Context, key runtime.SessionKey) error {
	k := keysFor(key)
	bctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.client.Pipelined(bctx, func(p redis.Pipeliner) error {
		p.Del(bctx, k.list()...)
		p.ZRem(bctx, indexKey(key.Principal), key.ID)
		return nil
	})
	s.cache.remove(k.tag)
	if err != nil {
		return fail(ctx, "delete session", err)
	}
	return nil
}

// Ping reports whether Redis answers within the store timeout.
func (s *Redis) Ping(ctx context.Context) error {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.client.Ping(bctx).Err(); err != nil {
		return fail(ctx, "ping session store", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Redis) Close() error {
	s.stop.Do(func() { close(s.done) })
	s.swept.Wait()
	err := s.client.Close()
	s.batch.wait() // what is in flight fails at once on the closed client
	if err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("close redis store: %w", err)
	}
	return nil
}

// maxOrphans bounds the locks sweep tracks; past it the lease bounds them.
const maxOrphans = 4096

// orphan is a lock a failed Acquire or Release may have left in Redis: a
// command whose answer the store gave up on may still run once Redis
// answers again (a stalled Redis runs what it had queued).
type orphan struct {
	lock, token string
	until       time.Time // the lock has expired by itself by then
}

// abandon hands a lock to sweep; when sweep is behind, the lease bounds it.
func (s *Redis) abandon(lock, token string) {
	select {
	case s.orphans <- orphan{lock: lock, token: token, until: time.Now().Add(s.opts.LockLease)}:
	default:
	}
}

// sweep releases orphaned locks every store timeout until their lease
// would have run out, so that a Redis outage leaves no session busy for a
// whole lock_lease. A release may land before the late command it undoes
// (they use different connections), hence the repeats; releasing a token
// no run holds is always safe.
func (s *Redis) sweep() {
	t := time.NewTicker(s.opts.Timeout)
	defer t.Stop()
	var pending []orphan
	for {
		select {
		case <-s.done:
			return
		case o := <-s.orphans:
			if len(pending) < maxOrphans {
				pending = append(pending, o)
			}
		case <-t.C:
			pending = s.releaseOrphans(pending)
		}
	}
}

// releaseOrphans releases every orphan still within its lease in one
// round trip and returns those.
func (s *Redis) releaseOrphans(pending []orphan) []orphan {
	now := time.Now()
	live := pending[:0]
	for _, o := range pending {
		if now.Before(o.until) {
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		return live
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range live {
			// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT.
			s.scripts.release.Eval(ctx, p, []string{o.lock}, o.token)
		}
		return nil
	})
	return live
}
