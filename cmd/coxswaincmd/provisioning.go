package coxswaincmd

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/provision"
)

// checkProvisioning parses --gateway-provisioning and the shared mode's flags.
func (c *controllerConfig) checkProvisioning() error {
	mode := c.provisioning
	switch mode {
	case "auto":
		mode = "shared"
		if c.addressPool != "" || c.dataPlane.inProcess {
			mode = "none"
		}
	case "shared":
		if c.addressPool != "" {
			return fmt.Errorf("--gateway-provisioning=shared and --gateway-address-pool are exclusive")
		}
	case "none":
	default:
		return fmt.Errorf("--gateway-provisioning: %q is none of auto, shared, none", mode)
	}
	if mode == "none" {
		return nil
	}
	p := &controller.Provisioning{ServiceType: corev1.ServiceType(c.serviceType)}
	switch p.ServiceType {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, corev1.ServiceTypeClusterIP:
	default:
		return fmt.Errorf("--gateway-service-type: %q is none of LoadBalancer, NodePort, ClusterIP", c.serviceType)
	}
	sel, err := labels.ConvertSelectorToLabelsMap(c.proxySelector)
	if err != nil || len(sel) == 0 {
		return fmt.Errorf("--shared-proxy-selector: %q is not a non-empty list of key=value labels", c.proxySelector)
	}
	p.ProxySelector = sel
	p.ProxyNamespace = c.dataPlane.namespace // the shared pool runs next to the controller
	first, last, ok := strings.Cut(c.portRange, "-")
	f, err1 := strconv.ParseInt(first, 10, 32)
	l, err2 := strconv.ParseInt(last, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("--internal-port-range: %q is not FIRST-LAST", c.portRange)
	}
	p.Ports = provision.PortRange{First: int32(f), Last: int32(l)}
	if err := p.Ports.Validate(); err != nil {
		return fmt.Errorf("--internal-port-range: %w", err)
	}
	c.provision = p
	return nil
}
