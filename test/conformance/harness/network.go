package harness

import (
	"fmt"
	"os/exec"
)

// localRoute makes every address of cidr local to the namespace, as 127.0.0.0/8 is: any of them
// can be bound, and traffic to them never leaves the namespace.
func localRoute(cidr string) error {
	if out, err := exec.Command("ip", "route", "add", "local", cidr, "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip route add local %s dev lo: %v: %s", cidr, err, out)
	}
	return nil
}
