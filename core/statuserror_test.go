package core_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

func TestErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		ok     bool
	}{
		{nil, 0, false},
		{io.ErrUnexpectedEOF, 0, false},
		{core.ErrBodyTooLarge, http.StatusRequestEntityTooLarge, true},
		{fmt.Errorf("reading the request body: %w", core.ErrBodyTooLarge), http.StatusRequestEntityTooLarge, true},
		{errors.Join(io.EOF, core.ErrBodyTooLarge), http.StatusRequestEntityTooLarge, true},
	} {
		if st, ok := core.ErrorStatus(tc.err); st != tc.status || ok != tc.ok {
			t.Errorf("ErrorStatus(%v) = %d, %v; want %d, %v", tc.err, st, ok, tc.status, tc.ok)
		}
	}
}
