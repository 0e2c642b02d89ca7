//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testHelmQuotas checks per-user limits in the real cluster: with a UserPolicy that leaves
// room for two more kernels, six starts at once, sent to both API server replicas at their
// pods' addresses, admit exactly two (real kernels, answering) and refuse four with 403 and
// the limit in the reason; meanwhile the user never has more Kernels or kernel pods than the
// limit. The user's UserUsage, as kubectl shows it, says so, and deleting the kernels gives
// the room back.
func testHelmQuotas(t *testing.T, env *helmEnv, api *jupyterAPI) {
	ctx := t.Context()
	c := env.client
	var me struct {
		Identity struct {
			Username string `json:"username"`
		} `json:"identity"`
	}
	api.getJSON(t, "api/me", &me)
	user := nbv1.Owner(me.Identity.Username)
	owned := func() (kernels, pods int, err error) {
		var kl nbv1.KernelList
		if err := c.List(ctx, &kl, client.InNamespace(helmNamespace)); err != nil {
			return 0, 0, err
		}
		for _, k := range kl.Items {
			if k.Spec.Owner == user && k.DeletionTimestamp == nil {
				kernels++
			}
		}
		var pl corev1.PodList
		if err := c.List(ctx, &pl, client.InNamespace(helmNamespace), client.MatchingLabels{
			nbv1.LabelOwner: nbv1.OwnerLabelValue(user), nbv1.LabelComponent: "kernel"}); err != nil {
			return 0, 0, err
		}
		for _, p := range pl.Items {
			if p.DeletionTimestamp == nil {
				pods++
			}
		}
		return kernels, pods, nil
	}
	have, _, err := owned()
	if err != nil {
		t.Fatal(err)
	}
	limit := int32(have + 2)
	policy := &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: "e2e-quota"},
		Spec: nbv1.UserPolicySpec{Users: []string{string(user)}, Limits: nbv1.UserLimits{Kernels: &limit}}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), policy) })

	// Each replica at its own address, once it has seen the policy.
	replicas := env.apiServers(t)
	if len(replicas) != 2 {
		t.Fatalf("%d API server replicas, want 2", len(replicas))
	}
	for i, r := range replicas {
		testenv.Eventually(t, fmt.Sprintf("replica %d sees the policy", i), time.Minute, func() error {
			var st struct {
				Quota *struct {
					Limits struct {
						Kernels *int `json:"kernels"`
					} `json:"limits"`
				} `json:"quota"`
			}
			r.getJSON(t, "api/status", &st)
			if st.Quota == nil || st.Quota.Limits.Kernels == nil || *st.Quota.Limits.Kernels != int(limit) {
				return fmt.Errorf("quota %+v", st.Quota)
			}
			return nil
		})
	}

	usage := func(want string) {
		t.Helper()
		testenv.Eventually(t, "usage "+want, time.Minute, func() error {
			u := &nbv1.UserUsage{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: nbv1.UsageName(user)}, u); err != nil {
				return err
			}
			if u.Status.Kernels != want || u.Status.Policies != policy.Name {
				return fmt.Errorf("usage %+v", u.Status)
			}
			return nil
		})
	}
	if have > 0 {
		// The kernels that ran before the policy are counted (the controller records them).
		usage(strconv.Itoa(have) + "/" + strconv.Itoa(int(limit)))
	}

	var peakKernels, peakPods atomic.Int64
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if k, p, err := owned(); err == nil {
				peakKernels.Store(max(peakKernels.Load(), int64(k)))
				peakPods.Store(max(peakPods.Load(), int64(p)))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	answers := make([]answer, 6)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			r := replicas[i%2]
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"api/kernels", bytes.NewReader([]byte(`{"name":"python3"}`)))
			if err != nil {
				answers[i].err = err
				return
			}
			req.Header.Set("Authorization", "token "+r.token)
			resp, err := r.hc.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			answers[i].status = resp.StatusCode
			answers[i].err = json.Unmarshal(data, &answers[i].body)
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	reason := fmt.Sprintf("kernels: %d of %d", limit, limit)
	var started []string
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("start %d: %v", i, a.err)
		case a.status == http.StatusCreated:
			started = append(started, fmt.Sprint(a.body["id"]))
		case a.status != http.StatusForbidden || a.body["reason"] != reason:
			t.Errorf("start %d: %d %v, want 201 or 403 with reason %q", i, a.status, a.body, reason)
		}
	}
	for _, id := range started {
		t.Cleanup(func() { api.deleteQuietly("api/kernels/" + id) })
	}
	if len(started) != 2 || peakKernels.Load() > int64(limit) || peakPods.Load() > int64(limit) {
		t.Fatalf("%d of 6 starts admitted (want 2); at most %d kernels and %d kernel pods of %s at once (limit %d)",
			len(started), peakKernels.Load(), peakPods.Load(), user, limit)
	}
	usage(strconv.Itoa(int(limit)) + "/" + strconv.Itoa(int(limit)))
	for _, id := range started {
		api.call(t, http.MethodDelete, "api/kernels/"+id, nil).want(t, http.StatusNoContent)
	}
	usage(strconv.Itoa(have) + "/" + strconv.Itoa(int(limit)))
}
