package providers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// eventReader reads the data events of a streamed answer's body, as
// go-openai's stream reader does (events_test.go compares the two on the
// same bodies), without its regular expressions and its allocation per
// line: those were most of what relaying a chunk cost, and the first chunk
// waited for them. go-openai still makes the call and checks its status;
// the stream's body is read here.
type eventReader struct {
	// r reads the body while an event is read, and goes back to readers
	// once it has nothing left buffered: nil while the stream waits for
	// its next event.
	r   *bufio.Reader
	src primedBody
	// rare holds what only a long line or a line that is not a data event
	// needs, made at the first. The reader is one cache line without it,
	// the first a stream's every chunk touches (issue 22).
	rare *rareLines
}

// rareLines is what an event reader keeps of the lines that are not one
// data event each.
type rareLines struct {
	long  []byte       // a line longer than r's buffer
	other bytes.Buffer // lines that are not data events: an error body, maybe
}

// rareLines returns e.rare, made when first needed.
func (e *eventReader) rareLines() *rareLines {
	if e.rare == nil {
		e.rare = new(rareLines)
	}
	return e.rare
}

// newEventReader reads the events of body. pause, when not nil, is called
// before a read of body that may wait, when an event was handed over since
// the last call (handed): the stream's events read so far have all been
// handed over (runtime.StreamPauser).
func newEventReader(body io.Reader, pause runtime.Pauser) *eventReader {
	e := new(eventReader)
	e.reset(body, pause, 0)
	return e
}

// reset makes e a reader of body's events, as newEventReader does, failing
// with errTooLarge once more than max bytes came (0: no bound); a call
// keeps its stream's reader in itself (call.events).
func (e *eventReader) reset(body io.Reader, pause runtime.Pauser, max int64) {
	left := int64(math.MaxInt64) // no bound
	if max > 0 {
		left = max
	}
	*e = eventReader{src: primedBody{body: body, pause: pause, left: left, max: max}}
}

// handed records that the event last read was handed over: the next read
// that may wait calls pause first.
func (e *eventReader) handed() { e.src.owed = e.src.pause != nil }

// eventBuffer is the size of an event reader's buffer: a chunk's line is a
// few hundred bytes (longer lines are put together in long), and bufio's
// default 4 KB was the largest buffer an open stream kept (issue 22).
const eventBuffer = 1 << 10

// readers are the event readers' buffers. A stream spends nearly all its
// life waiting for the next event, and a read that waits holds the buffer
// it reads into: a stream kept its own 1 KB buffer (and the bufio.Reader
// around it) for as long as it lasted, the largest thing it held beside
// net/http's own (issue 22). So the wait reads one byte into the reader
// itself (primedBody), and only then takes a buffer from here for the rest
// of the event, put back once the buffer is read out: the buffers are
// about as many as the events being read at once.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, eventBuffer) }}

// primedBody is a stream's body with the byte that ended the wait for an
// event in front of it. It bounds the body too (max_response_bytes), which
// a reader of its own around the body did: one more object a stream
// touched at every chunk (issue 22).
type primedBody struct {
	// What a chunk reads comes first: with the event reader's r, within
	// its first cache line (TestEventReaderIsOneLine).
	body  io.Reader
	pause runtime.Pauser // before a read of body, when not nil and owed
	// left is what may still be read of body (math.MaxInt64: no bound).
	left  int64
	first [1]byte
	has   bool
	// owed: an event was handed over since pause was last called. Without
	// one, pause has nothing to send: it is not called, which spares a
	// stream's every chunk a look at the run's state, gone cold while the
	// stream waited, between the byte that ends the wait and the rest of
	// the event (issue 22).
	owed bool
	max  int64 // the bound, for its error (0: none)
}

// Read returns the waiting byte, then reads the body.
func (p *primedBody) Read(b []byte) (int, error) {
	if p.has && len(b) > 0 {
		b[0], p.has = p.first[0], false
		return 1, nil
	}
	p.paused()
	return p.read(b)
}

// read reads body, failing once more than max bytes came.
func (p *primedBody) read(b []byte) (int, error) {
	if p.left < 0 {
		return 0, p.tooLarge()
	}
	if p.left < int64(len(b)) {
		b = b[:p.left+1] // one byte over tells a body over the bound
	}
	n, err := p.body.Read(b)
	p.left -= int64(n)
	if p.left < 0 {
		return 0, p.tooLarge()
	}
	return n, err
}

func (p *primedBody) tooLarge() error {
	return fmt.Errorf("%w (over %d bytes)", errTooLarge, p.max)
}

// paused calls pause, if an event was handed over since the last call: a
// read of the body is next.
func (p *primedBody) paused() {
	if p.owed {
		p.owed = false
		p.pause.Pause()
	}
}

// wait waits for the body's next byte, then takes a buffer to read on.
func (e *eventReader) wait() error {
	e.src.paused()
	for {
		n, err := e.src.read(e.src.first[:])
		if n > 0 {
			e.src.has = true
			e.r = readers.Get().(*bufio.Reader)
			e.r.Reset(&e.src)
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// release puts the buffer back once nothing is left in it (force: in any
// case, at the stream's end). What line returned is then no longer valid.
func (e *eventReader) release(force bool) {
	if e.r != nil && (force || e.r.Buffered() == 0) {
		e.r.Reset(nil)
		readers.Put(e.r)
		e.r = nil
	}
}

// close puts the reader's buffer back; the reader is not used again.
func (e *eventReader) close() { e.release(true) }

// emptyEventsLimit is how many lines that are not data events may come in
// a row (go-openai's default).
const emptyEventsLimit = 300

var (
	dataPrefix  = []byte("data:")
	errorPrefix = []byte(`{"error":`)
	doneEvent   = []byte("[DONE]")
)

// next returns the next data event's payload, valid until the next call. It
// returns io.EOF at [DONE] or at the end of the body; an error event, or a
// body that ends after an error object, is an error wrapping the
// *openai.APIError it carries.
func (e *eventReader) next() ([]byte, error) {
	var empty int
	errorEvent := false
	for {
		raw, readErr := e.line()
		if readErr != nil || errorEvent {
			// A last line without its newline is not an event.
			if apiErr := e.apiError(); apiErr != nil {
				return nil, fmt.Errorf("error, %w", apiErr)
			}
			return nil, readErr
		}
		line := bytes.TrimSpace(raw)
		payload, isData := bytes.CutPrefix(line, dataPrefix)
		if isData {
			payload = trimSpaceLeft(payload)
			if bytes.HasPrefix(payload, errorPrefix) {
				errorEvent = true
			}
		}
		if !isData || errorEvent {
			if !isData {
				payload = line
			}
			if len(payload) > 0 { // the empty line that ends every event adds nothing
				e.rareLines().other.Write(payload)
			}
			if empty++; empty > emptyEventsLimit {
				return nil, openai.ErrTooManyEmptyStreamMessages
			}
			continue
		}
		if bytes.Equal(payload, doneEvent) {
			return nil, io.EOF
		}
		return payload, nil
	}
}

// errLineTooLong is an event line over maxLineBytes.
var errLineTooLong = fmt.Errorf("%w (an event line over %d bytes)", errTooLarge, maxLineBytes)

// line reads one line, its newline included.
func (e *eventReader) line() ([]byte, error) {
	// The line before this one has been used: a buffer read out goes back
	// before the wait for more.
	e.release(false)
	if e.r == nil {
		if err := e.wait(); err != nil {
			return nil, err
		}
	}
	line, err := e.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	// An event is a delta; a line over maxLineBytes (its end of line
	// aside) is an upstream gone wrong, and reading on would hold all of
	// it. The check is made before each read, so that a line is never
	// held much past the limit, and once more at its end.
	rare := e.rareLines()
	rare.long = append(rare.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(rare.long) > maxLineBytes {
			return nil, errLineTooLong
		}
		line, err = e.r.ReadSlice('\n')
		rare.long = append(rare.long, line...)
	}
	if len(bytes.TrimRight(rare.long, "\r\n")) > maxLineBytes {
		return nil, errLineTooLong
	}
	return rare.long, err
}

// apiError is the error object the lines that were not data events make up,
// if they make up one.
func (e *eventReader) apiError() *openai.APIError {
	if e.rare == nil || e.rare.other.Len() == 0 {
		return nil
	}
	var resp openai.ErrorResponse
	if json.Unmarshal(e.rare.other.Bytes(), &resp) != nil {
		return nil
	}
	return resp.Error
}

// trimSpaceLeft drops the leading white space `\s` of a regular expression
// matches: tab, newline, form feed, carriage return and space.
func trimSpaceLeft(b []byte) []byte {
	for len(b) > 0 {
		switch b[0] {
		case '\t', '\n', '\f', '\r', ' ':
			b = b[1:]
		default:
			return b
		}
	}
	return b
}
