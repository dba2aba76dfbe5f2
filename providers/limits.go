package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// An upstream decides how much it sends, so every byte read from it is
// bounded (CONTRACT §14): a whole answer by max_response_bytes, one event
// line of a stream by maxLineBytes, an error body by maxErrorBody. And an
// answer is decoded as it is read, so that the gateway holds about the
// bytes it read, not several copies of them: a stream's events are decoded
// one line at a time (events.go), and a non-streamed answer is read once
// into a buffer of its announced size and decoded from there (decode), not
// through go-openai's json.Decoder, whose doubling buffer and copies held
// four times a large answer.

// DefaultMaxResponseBytes bounds one answer when the provider sets no
// max_response_bytes.
const DefaultMaxResponseBytes = 32 << 20

// maxLineBytes bounds one line of a stream: an event is a delta, a few
// hundred bytes; a line over 1 MiB is an upstream gone wrong.
const maxLineBytes = 1 << 20

// maxErrorBody bounds what is read of an error answer: only its start is
// ever shown.
const maxErrorBody = 64 << 10

// errTooLarge is an answer over a bound; the call fails with 502.
var errTooLarge = errors.New("response too large")

// cappedBody ends a body quietly after its first bytes.
type cappedBody struct {
	io.Reader
	io.Closer
}

// capBody returns the first max bytes of body, then io.EOF.
func capBody(body io.ReadCloser, max int64) io.ReadCloser {
	return cappedBody{Reader: io.LimitReader(body, max), Closer: body}
}

// decode reads and decodes a non-streamed answer into a.answer, and hands
// go-openai an empty object in its place. An answer that says or turns out
// to be over the bound fails without being read further.
func (a *attempt) decode(resp *http.Response) error {
	defer resp.Body.Close()
	body, err := readBounded(resp.Body, resp.ContentLength, a.maxBody)
	if err != nil {
		return err
	}
	var answer openai.ChatCompletionResponse
	if err := json.Unmarshal(body, &answer); err != nil {
		return err
	}
	a.answer = &answer
	resp.Body = io.NopCloser(strings.NewReader("{}"))
	return nil
}

// readBounded reads r whole into one buffer, failing with errTooLarge past
// max bytes. With the size announced (Content-Length, or -1), the buffer
// is made that size at once; without it, the body is read in chunks that
// are then copied into a buffer of the exact size, so what is allocated is
// twice the body, not the four times of a buffer grown by doubling.
func readBounded(r io.Reader, size, max int64) ([]byte, error) {
	tooLarge := fmt.Errorf("%w (over %d bytes)", errTooLarge, max)
	if size > max {
		return nil, tooLarge
	}
	r = io.LimitReader(r, max+1)
	if size >= 0 {
		buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
		if _, err := buf.ReadFrom(r); err != nil {
			return nil, err
		}
		if int64(buf.Len()) > max {
			return nil, tooLarge
		}
		return buf.Bytes(), nil
	}
	var chunks [][]byte
	total, next := 0, 32<<10
	for {
		chunk := make([]byte, next)
		n, err := io.ReadFull(r, chunk)
		if n > 0 {
			chunks = append(chunks, chunk[:n])
			total += n
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		next = min(next*2, 1<<20)
	}
	if int64(total) > max {
		return nil, tooLarge
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}
