package cache

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/switchboard-ai/switchboard/internal/redact"
)

// redisLog writes go-redis's own log lines (a connection pool that cannot
// dial, a failover) to the gateway's log, in its format, so that a store
// that is down does not interleave plain text with the JSON lines. A line
// is masked as every error the gateway logs is (redact.Secrets).
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	line := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.WarnContext(ctx, "redis client", "detail", redact.Secrets(line))
}
