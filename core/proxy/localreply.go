package proxy

import (
	"net/http"

	"github.com/coxswain-labs/coxswain/core"
)

// The responses the engine makes itself on a route get the headers of the rule's
// HTTPLocalResponseFilters (CORS): its errors through the route's error writer, a request
// filter's own answer through localReplyWriter. The upstream's responses get FilterResponse in the
// forwarders instead; a response is one or the other, so no header is set twice.

// localFilters are the HTTPLocalResponseFilters among fs, nil when none is.
func localFilters(fs []loadedFilter) []core.HTTPLocalResponseFilter {
	var out []core.HTTPLocalResponseFilter
	for _, f := range fs {
		if l, ok := f.resp.(core.HTTPLocalResponseFilter); ok {
			out = append(out, l)
		}
	}
	return out
}

// localErrors is errw running the HTTPLocalResponseFilters of fs before each error it writes;
// errw itself when fs has none (most routes: their forwarders stay the shared plain ones).
func localErrors(fs []loadedFilter, errw core.HTTPErrorWriter) core.HTTPErrorWriter {
	local := localFilters(fs)
	if local == nil {
		return errw
	}
	le := localReplyErrors{local: local, next: errw}
	if tw, ok := errw.(core.HTTPTrailerErrorWriter); ok {
		return localReplyTrailerErrors{le, tw}
	}
	return le
}

type localReplyErrors struct {
	local []core.HTTPLocalResponseFilter
	next  core.HTTPErrorWriter
}

func (e localReplyErrors) WriteError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	runLocal(e.local, r, status, w.Header())
	e.next.WriteError(w, r, status, msg)
}

// localReplyTrailerErrors keeps the trailer errors of a protocol that has them (gRPC): sent after
// the upstream's header, which had FilterResponse already.
type localReplyTrailerErrors struct {
	localReplyErrors
	tw core.HTTPTrailerErrorWriter
}

func (e localReplyTrailerErrors) WriteTrailerError(trailer http.Header, r *http.Request, status int, msg string) {
	e.tw.WriteTrailerError(trailer, r, status, msg)
}

func runLocal(local []core.HTTPLocalResponseFilter, r *http.Request, status int, h http.Header) {
	for _, l := range local {
		l.FilterLocalResponse(r, status, h)
	}
}

// localReplyWriter is the ResponseWriter a request filter answers through when local response
// filters ran before it: they see the header as the status is written.
type localReplyWriter struct {
	http.ResponseWriter
	r       *http.Request
	local   []core.HTTPLocalResponseFilter
	written bool
}

func (w *localReplyWriter) WriteHeader(status int) {
	if !w.written && status >= 200 {
		w.written = true
		runLocal(w.local, w.r, status, w.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *localReplyWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *localReplyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
