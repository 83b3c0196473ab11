package adminapi

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/coxswain-labs/coxswain/core/admin"
)

// ProxyPodSelector selects the pods of the proxy pools: the shared pool as deploy/ and the chart
// label it, and every dedicated pool (controller/provision/dedicated.Component).
const ProxyPodSelector = "app.kubernetes.io/name=coxswain,app.kubernetes.io/component in (proxy,dedicated-proxy)"

// Pod log limits: the default and largest tailLines, and the most bytes returned.
const (
	defaultTailLines = 500
	maxTailLines     = 5000
	maxLogBytes      = 4 << 20
)

// PodLogs serves GET /api/v1/pods/{name}/logs: a proxy pod's recent log through the API
// server. It needs an authenticated user (auth nil: it refuses every request), who must also
// be allowed `get pods/log` in the pod's namespace.
type PodLogs struct {
	Kube kubernetes.Interface
	Auth *Authorizer
}

// Register adds the endpoint to mux.
func (p *PodLogs) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/pods/{name}/logs", p.serve)
}

func (p *PodLogs) serve(w http.ResponseWriter, r *http.Request) {
	user, ok := UserFrom(r.Context())
	if p.Auth == nil || !ok {
		admin.WriteError(w, http.StatusForbidden, "pod logs are served only with --admin-auth=kubernetes (the admin API runs without authentication)")
		return
	}
	q := r.URL.Query()
	opts := &corev1.PodLogOptions{Container: q.Get("container"), LimitBytes: ptrTo(int64(maxLogBytes))}
	tail := defaultTailLines
	if s := q.Get("tailLines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			admin.WriteError(w, http.StatusBadRequest, "tailLines: a positive number is required")
			return
		}
		tail = min(n, maxTailLines)
	}
	opts.TailLines = ptrTo(int64(tail))
	if s := q.Get("previous"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			admin.WriteError(w, http.StatusBadRequest, "previous: true or false")
			return
		}
		opts.Previous = b
	}
	name := r.PathValue("name")
	pods, err := p.Kube.CoreV1().Pods(q.Get("namespace")).List(r.Context(), metav1.ListOptions{
		LabelSelector: ProxyPodSelector, FieldSelector: "metadata.name=" + name})
	if err != nil {
		admin.WriteError(w, http.StatusBadGateway, "listing proxy pods: "+err.Error())
		return
	}
	switch len(pods.Items) {
	case 0:
		admin.WriteError(w, http.StatusNotFound, "no proxy pod named "+name+" (pods labelled "+ProxyPodSelector+")")
		return
	case 1:
	default:
		admin.WriteError(w, http.StatusBadRequest, fmt.Sprintf("namespace: %d proxy pods are named %s; say which namespace", len(pods.Items), name))
		return
	}
	pod := pods.Items[0]
	allowed, why, err := p.Auth.Allowed(r.Context(), user, authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: pod.Namespace, Verb: "get", Resource: "pods", Subresource: "log", Name: pod.Name}})
	switch {
	case err != nil:
		admin.WriteError(w, http.StatusBadGateway, "SubjectAccessReview: "+err.Error())
		return
	case !allowed:
		admin.WriteError(w, http.StatusForbidden, "user "+user.Name+" may not get pods/log in "+pod.Namespace+why)
		return
	}
	stream, err := p.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(r.Context())
	if err != nil {
		admin.WriteError(w, http.StatusBadGateway, "reading the log of "+pod.Namespace+"/"+pod.Name+": "+err.Error())
		return
	}
	defer stream.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.Copy(w, io.LimitReader(stream, maxLogBytes))
}

func ptrTo[T any](v T) *T { return &v }
