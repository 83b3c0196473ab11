package controller

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
)

// Options configure a Controller. Log, Kube, Gateway, REST, Registry and NewPublisher are required.
type Options struct {
	Log     *zap.Logger
	Kube    kubernetes.Interface
	Gateway gwclientset.Interface
	// REST is the API server connection the clients above were made from: the informers and
	// status writes of the kinds modules declare are built from it.
	REST *rest.Config
	// Registry is the frozen set of modules compiled into the binary: it selects the route kinds
	// translated and the features GatewayClasses advertise.
	Registry *core.Registry
	// NewPublisher starts the data plane seam of a leadership term.
	NewPublisher NewPublisher
	// SessionKey gives the secret session persistence cookies are keyed with
	// (translator.Options.SessionKey). It is called when a leadership term starts, after the data
	// plane has started, so it may come from the discovery CA every replica shares: then every
	// replica, and every restart, keys cookies alike. Nil, or returning nothing: a random key per
	// process, so a failover re-pins every client once.
	SessionKey func() []byte
	// KindSettings are the translator's Options.KindSettings (--ingress-http-address, ...).
	KindSettings map[string]string
	// IngressStatusService, when set and StatusAddresses are not, is the Service in front of the
	// proxies whose addresses every Ingress's status.loadBalancer publishes
	// (--ingress-status-service): its load-balancer ingress, else its cluster IPs.
	IngressStatusService types.NamespacedName

	// ControllerName selects our GatewayClasses; translator.DefaultControllerName when empty.
	ControllerName string
	// StatusAddresses are published in every Gateway's status.addresses (see ParseAddresses).
	// Without them no Gateway is Programmed: reason AddressNotAssigned.
	StatusAddresses []gwapiv1.GatewayStatusAddress
	// AddressPool, when valid, gives every Gateway that asks for no address one of its own from
	// this range: its listeners bind it and its status publishes it. The range must be routed to
	// the proxies' hosts. It excludes StatusAddresses.
	AddressPool netip.Prefix
	// Provisioning turns the shared mode on: every Gateway gets a VIP Service in front of the
	// shared proxy pool and an identity ServiceAccount, its listeners bind internal ports, and its
	// status publishes the Service's addresses (StatusAddresses only when the Service has none).
	// Exclusive with AddressPool.
	Provisioning *Provisioning

	// Holdoff is the first gap between translations in a burst of changes (25ms when zero; the
	// gap doubles while the burst lasts); MaxDelay caps the gap, so it bounds how long a change
	// waits in a busy world (1s when zero). A lone change is translated at once.
	Holdoff, MaxDelay time.Duration
	// StatusWorkers is the number of objects whose status is written concurrently (4 when zero).
	StatusWorkers int
	// ShutdownTimeout bounds how long a leadership term's publisher may take to close, letting
	// in-flight requests finish (15s when zero).
	ShutdownTimeout time.Duration

	LeaderElection LeaderElection

	// Documents configure the fetcher of remote documents (a JwtAuth's JWKS): the client, size
	// and time bounds. Its OnChange is the controller's (a changed document is translated again).
	Documents documents.Options
	// ACME, when set, runs the ACME client of automatic certificates while this controller
	// leads (docs/https.md): its Storage is shared by every replica (acme.SecretStorage), and
	// the controller sets OnChange and Served. nil: ACME listeners stay Pending.
	ACME *acme.Options
	// DocumentWait bounds how long a translation that asked for a remote document not fetched
	// yet waits for its first fetch before it is published (2s when zero): long enough that a new
	// object, or a new leader, does not publish a snapshot without it, short enough that a dead
	// server does not hold up the rest of the world.
	DocumentWait time.Duration
}

// LeaderElection configures the Lease that picks the one replica that translates, publishes and
// writes status.
type LeaderElection struct {
	// Disabled makes this replica the leader unconditionally: for a single replica only.
	Disabled bool
	// Namespace and Name of the Lease; Namespace defaults to the controller's own namespace (the
	// service account's, or POD_NAMESPACE), Name to "coxswain-controller".
	Namespace, Name string
	// Identity of this replica in the Lease; $POD_NAME, else the hostname and a unique suffix,
	// when empty.
	Identity string
	// LeaseDuration (15s), RenewDeadline (10s) and RetryPeriod (2s), as in client-go: a standby
	// takes over at most LeaseDuration + RetryPeriod after the leader stopped renewing.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (o *Options) setDefaults() error {
	var errs []error
	if o.Log == nil {
		errs = append(errs, errors.New("no logger"))
	}
	if o.Kube == nil || o.Gateway == nil || o.REST == nil {
		errs = append(errs, errors.New("no Kubernetes clients"))
	}
	if o.Registry == nil {
		errs = append(errs, errors.New("no module registry"))
	}
	if o.NewPublisher == nil {
		errs = append(errs, errors.New("no publisher"))
	}
	if o.AddressPool.IsValid() && len(o.StatusAddresses) > 0 {
		errs = append(errs, errors.New("status addresses and an address pool are exclusive"))
	}
	if o.AddressPool.IsValid() && o.Provisioning != nil {
		errs = append(errs, errors.New("an address pool and shared-mode provisioning are exclusive"))
	}
	if o.Provisioning != nil && o.Provisioning.Dedicated != nil {
		if err := o.Provisioning.Dedicated.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Provisioning != nil && o.Provisioning.Ports != (provision.PortRange{}) {
		if err := o.Provisioning.Ports.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.ControllerName == "" {
		o.ControllerName = translator.DefaultControllerName
	}
	if o.Holdoff <= 0 {
		o.Holdoff = 25 * time.Millisecond
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Second
	}
	o.ShutdownTimeout = orDefault(o.ShutdownTimeout, 15*time.Second)
	o.DocumentWait = orDefault(o.DocumentWait, 2*time.Second)
	if o.StatusWorkers <= 0 {
		o.StatusWorkers = 4
	}
	le := &o.LeaderElection
	if le.Name == "" {
		le.Name = "coxswain-controller"
	}
	if le.Namespace == "" {
		le.Namespace = OwnNamespace()
	}
	if le.Identity == "" {
		le.Identity = os.Getenv("POD_NAME")
	}
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = fmt.Sprintf("%s_%d", host, time.Now().UnixNano())
	}
	le.LeaseDuration = orDefault(le.LeaseDuration, 15*time.Second)
	le.RenewDeadline = orDefault(le.RenewDeadline, 10*time.Second)
	le.RetryPeriod = orDefault(le.RetryPeriod, 2*time.Second)
	if o.ACME != nil {
		if st, ok := o.ACME.Storage.(*acme.SecretStorage); ok {
			// The replicas share the ACME storage where they share the Lease.
			if st.Namespace == "" {
				st.Namespace = le.Namespace
			}
			if st.Identity == "" {
				st.Identity = le.Identity
			}
			if st.Client == nil {
				st.Client = o.Kube
			}
		}
	}
	return errors.Join(errs...)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// OwnNamespace is the namespace the controller runs in: that of its service account, else
// $POD_NAMESPACE, else "coxswain-system".
func OwnNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "coxswain-system"
}

// ParseAddresses turns --status-address values into Gateway status addresses: an IP address
// becomes type IPAddress, anything else must be a DNS name and becomes type Hostname.
func ParseAddresses(values []string) ([]gwapiv1.GatewayStatusAddress, error) {
	var out []gwapiv1.GatewayStatusAddress
	for _, v := range values {
		typ := gwapiv1.HostnameAddressType
		if ip, err := netip.ParseAddr(v); err == nil {
			typ, v = gwapiv1.IPAddressType, ip.String()
		} else if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			return nil, fmt.Errorf("status address %q is neither an IP address nor a hostname: %s", v, strings.Join(errs, "; "))
		}
		out = append(out, gwapiv1.GatewayStatusAddress{Type: &typ, Value: v})
	}
	return out, nil
}
