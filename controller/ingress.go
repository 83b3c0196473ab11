package controller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ingressGK is networking.k8s.io Ingress, whose route kind module (modules/ingress/translate)
// has no RouteStatus: the controller writes its status.loadBalancer and reports its problems
// as Events here.
var ingressGK = schema.GroupKind{Group: networkingv1.GroupName, Kind: "Ingress"}

// ingressSide is what the controller does for Ingresses after a translation: Events for each
// problem and warning (once while it lasts, with a log line naming the Ingress, the field —
// for an annotation, the annotation — and the reason), and status.loadBalancer.
type ingressSide struct {
	kube     kubernetes.Interface
	log      *zap.Logger
	recorder record.EventRecorder
	stop     func()
	// lb is what status.loadBalancer.ingress says when service is unset; service, when set, is
	// the Service whose addresses it says instead (--ingress-status-service).
	lb       []networkingv1.IngressLoadBalancerIngress
	service  types.NamespacedName
	reported map[string]bool
}

// newIngressSide starts an event broadcaster; the addresses of Service service when it is set,
// else lb, are what status.loadBalancer.ingress says.
func newIngressSide(kube kubernetes.Interface, log *zap.Logger, lb []networkingv1.IngressLoadBalancerIngress, service types.NamespacedName) *ingressSide {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return &ingressSide{kube: kube, log: log, lb: lb, service: service, stop: b.Shutdown,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "coxswain"})}
}

// serviceLoadBalancer is what status.loadBalancer.ingress says for the proxies' Service: its
// load-balancer ingress, else its cluster IPs; nil (nothing written) while it has neither or
// does not exist.
func serviceLoadBalancer(store *translator.Store, k types.NamespacedName) []networkingv1.IngressLoadBalancerIngress {
	for _, svc := range store.Services {
		if svc.Namespace != k.Namespace || svc.Name != k.Name {
			continue
		}
		var out []networkingv1.IngressLoadBalancerIngress
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" || in.Hostname != "" {
				out = append(out, networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
			}
		}
		if len(out) > 0 {
			return out
		}
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
			}
		}
		return out
	}
	return nil
}

// ingressLoadBalancer is status.loadBalancer.ingress: the --status-address values, else the IP
// of --ingress-http-address when it names one; nil (nothing written) otherwise.
func ingressLoadBalancer(status []string, httpAddr string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range status {
		if ip, err := netip.ParseAddr(a); err == nil {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip.String()})
		} else {
			out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: a})
		}
	}
	if len(out) > 0 {
		return out
	}
	if ap, err := netip.ParseAddrPort(httpAddr); err == nil && !ap.Addr().IsUnspecified() {
		return []networkingv1.IngressLoadBalancerIngress{{IP: ap.Addr().String()}}
	}
	return nil
}

// after handles one translation's result.
func (s *ingressSide) after(ctx context.Context, store *translator.Store, res *translator.Result) {
	ings := map[types.NamespacedName]*networkingv1.Ingress{}
	for _, o := range store.Objects[ingressGK] {
		if ing, ok := o.(*networkingv1.Ingress); ok {
			ings[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
		}
	}
	s.report(ings, res)
	lb := s.lb
	if s.service.Name != "" {
		lb = serviceLoadBalancer(store, s.service)
	}
	if lb == nil {
		return
	}
	ours := ingressesTranslated(ings, res.Routes)
	sort.Slice(ours, func(i, j int) bool { return ours[i].String() < ours[j].String() })
	for _, k := range ours {
		if ing := ings[k]; !equality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, lb) {
			if err := s.writeStatus(ctx, k, lb); err != nil {
				s.log.Warn("writing Ingress status.loadBalancer", zap.String("ingress", k.String()), zap.Error(err))
			}
		}
	}
}

// ingressesTranslated are the Ingresses of ings that the translation made a route of (it
// has a route status for them: those of our IngressClass), looked up one by one. Not a loop over
// every route status: at thousands of Gateway API routes that hashed thousands of keys after
// every translation (RouteStatuses.All looks each base entry up in the overlay) for a handful
// of Ingresses or none, most of the controller's time between a route change's translation
// and its publication (`prepared`, docs/controller.md session 15).
func ingressesTranslated(ings map[types.NamespacedName]*networkingv1.Ingress, routes translator.RouteStatuses) []types.NamespacedName {
	var out []types.NamespacedName
	for nn := range ings {
		k := translator.RouteKey{Group: ingressGK.Group, Kind: ingressGK.Kind, Namespace: nn.Namespace, Name: nn.Name}
		if _, ok := routes.Lookup(k); ok {
			out = append(out, nn)
		}
	}
	return out
}

func (s *ingressSide) writeStatus(ctx context.Context, k types.NamespacedName, lb []networkingv1.IngressLoadBalancerIngress) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := s.kube.NetworkingV1().Ingresses(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(live.Status.LoadBalancer.Ingress, lb) {
			return nil
		}
		live.Status.LoadBalancer.Ingress = lb
		_, err = s.kube.NetworkingV1().Ingresses(k.Namespace).UpdateStatus(ctx, live, metav1.UpdateOptions{})
		return err
	})
}

// report emits a Warning Event and a log line for each Ingress problem and warning not
// reported before; one that goes away and comes back is reported again.
func (s *ingressSide) report(ings map[types.NamespacedName]*networkingv1.Ingress, res *translator.Result) {
	now := map[string]bool{}
	for _, p := range append(slices.Clone(res.Problems), res.Warnings...) {
		if p.Kind != ingressGK.Kind {
			continue
		}
		msg := p.Error()
		now[msg] = true
		if s.reported[msg] {
			continue
		}
		ing := ings[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		if ing == nil {
			continue
		}
		reason := p.Reason
		if reason == translator.ReasonWarning {
			reason = "InvalidIngress"
		}
		s.log.Warn("Ingress not served as written", zap.String("ingress", p.Namespace+"/"+p.Name),
			zap.String("field", p.Field), zap.String("reason", reason), zap.String("message", p.Message))
		s.recorder.Eventf(ing, corev1.EventTypeWarning, reason, "%s", eventMessage(p))
	}
	s.reported = now
}

func eventMessage(p *translator.Problem) string {
	if p.Field == "" {
		return p.Message
	}
	return fmt.Sprintf("%s: %s", p.Field, p.Message)
}

// companionWatches are the typed informers of the resources route kinds read besides their
// routes (IngressClass); any change to one may change which routes are whose.
func companionWatches(kinds []translation.RouteKind, cfgFor func(translation.CompanionAPI) (*moduleKind, error)) ([]*moduleKind, error) {
	var out []*moduleKind
	for _, k := range kinds {
		ik, ok := k.(translation.ImplicitParentKind)
		if !ok {
			continue
		}
		for _, c := range ik.Companions() {
			mk, err := cfgFor(c)
			if err != nil {
				return nil, fmt.Errorf("module %s: %s: %w", k.CoxswainModule().ID, c.GVK.Kind, err)
			}
			out = append(out, mk)
		}
	}
	return out, nil
}

// ingressHTTPAddressSetting is the KindSettings key of --ingress-http-address (the Ingress
// module's SettingHTTPAddress; controller/ does not import modules' translate halves).
const ingressHTTPAddressSetting = "ingress.http-address"

func statusAddressValues(as []gwapiv1.GatewayStatusAddress) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.Value)
	}
	return out
}
