package kubelet

import (
	"slices"
	"strings"
	"testing"
)

func TestBoundPorts(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000:0BB9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0A1E0005:0BB8 0A1E0001:D431 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
`
	got, err := boundPorts(strings.NewReader(table), tcpListen)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint16{3000, 3001}; !slices.Equal(got, want) {
		t.Errorf("listening ports = %v, want %v (the established connection is not one)", got, want)
	}
	if _, err := boundPorts(strings.NewReader("h\n 0: nocolon x 0A\n"), tcpListen); err == nil {
		t.Error("a malformed line parsed")
	}
}
