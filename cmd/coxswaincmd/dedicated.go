package coxswaincmd

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
)

// DefaultProxyImageRepository is the image --proxy-image defaults to, tagged with this build's
// version.
const DefaultProxyImageRepository = "ghcr.io/coxswain-labs/coxswain"

// dedicatedFlags configure the dedicated mode: the image and discovery address its provisioned
// proxies run with. The mode is on whenever the controller provisions Gateways.
type dedicatedFlags struct {
	image     string
	discovery string
}

func (d *dedicatedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.image, "proxy-image", "",
		`image of the dedicated proxies (a Gateway's CoxswainGatewayParameters may name another); "`+DefaultProxyImageRepository+`:<this version>" when empty`)
	fs.StringVar(&d.discovery, "dedicated-discovery-address", "",
		`host:port the dedicated proxies dial for discovery; "coxswain-discovery.<namespace>.svc:<port of --discovery-address>" when empty`)
}

// trustBundle holds the discovery CA bundle once the data plane has started; the dedicated
// mode copies it next to each dedicated Gateway.
type trustBundle struct {
	mu  sync.RWMutex
	pem []byte
}

func (b *trustBundle) set(pem []byte) {
	b.mu.Lock()
	b.pem = pem
	b.mu.Unlock()
}

func (b *trustBundle) get() []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.pem
}

// dedicated is the controller's Dedicated options; nil when nothing is provisioned.
func (c *controllerConfig) dedicated(bundle *trustBundle) (*controller.Dedicated, error) {
	if c.provision == nil || c.dataPlane.inProcess {
		return nil, nil
	}
	image := c.dedicatedMode.image
	if image == "" {
		v, _ := proxycmd.BuildVersion()
		if v == "(devel)" {
			v = "dev"
		}
		image = DefaultProxyImageRepository + ":" + strings.TrimPrefix(v, "+")
	}
	addr := c.dedicatedMode.discovery
	if addr == "" {
		_, port, err := net.SplitHostPort(c.dataPlane.address)
		if err != nil {
			return nil, fmt.Errorf("--discovery-address %q: %w", c.dataPlane.address, err)
		}
		ns := c.dataPlane.namespace
		if ns == "" {
			ns = controller.OwnNamespace()
		}
		addr = net.JoinHostPort("coxswain-discovery."+ns+".svc", port)
	}
	return &controller.Dedicated{Image: image, DiscoveryAddress: addr, TrustBundle: bundle.get,
		ServiceAccount: discovery.DedicatedServiceAccount}, nil
}
