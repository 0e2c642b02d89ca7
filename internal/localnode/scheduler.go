package localnode

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Event and condition reasons, as kube-scheduler uses them.
const (
	eventScheduled          = "Scheduled"
	eventFailedScheduling   = "FailedScheduling"
	reasonUnschedulable     = corev1.PodReasonUnschedulable
	unschedulableRetry      = time.Minute
	nodeSelectorMismatchFmt = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector (node %s has labels %v)."
)

// schedulerWorkers is how many pods are bound at once: a bind is an API round trip, and the
// pods of kernels started together otherwise waited for each other's.
const schedulerWorkers = 4

// scheduler binds the default scheduler's pods to the node, or marks them unschedulable.
type scheduler struct {
	node   *Node
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	lister corelisters.PodLister
	// nodes holds this node only.
	nodes corelisters.NodeLister
}

// forDefaultScheduler tells whether a pod waits for kube-scheduler, whose work this node does.
func forDefaultScheduler(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName)
}

// schedulingHandler queues the unscheduled pods the node should place.
func schedulingHandler(queue workqueue.TypedRateLimitingInterface[cache.ObjectName]) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && forDefaultScheduler(pod) {
			queue.Add(cache.MetaObjectToName(pod))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}
}

// nodeChangeHandler queues the pods still waiting when the node's labels change, so that a
// label added with kubectl places them at once rather than at their next retry.
func nodeChangeHandler(queue workqueue.TypedRateLimitingInterface[cache.ObjectName], pending corelisters.PodLister) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			before, ok1 := old.(*corev1.Node)
			after, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 || maps.Equal(before.Labels, after.Labels) {
				return
			}
			pods, err := pending.List(labels.Everything())
			if err != nil {
				return
			}
			for _, pod := range pods {
				if forDefaultScheduler(pod) {
					queue.Add(cache.MetaObjectToName(pod))
				}
			}
		},
	}
}

// next handles one queued pod; it returns false once the queue shut down.
func (s *scheduler) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	retryAfter, err := s.schedule(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Scheduling", "pod", key.String())
		}
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	if retryAfter > 0 {
		s.queue.AddAfter(key, retryAfter)
	}
	return true
}

// schedule binds the pod if the node suits it. An unschedulable pod is tried again after a
// while, in case the node's labels changed (kube-scheduler retries such pods too).
func (s *scheduler) schedule(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	pod, err := s.lister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !forDefaultScheduler(pod) || pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 {
		return 0, nil
	}
	node, err := s.nodes.Get(s.node.cfg.NodeName)
	if err != nil {
		return 0, fmt.Errorf("getting the node: %w", err)
	}
	if !nodeMatches(pod, node) {
		msg := fmt.Sprintf(nodeSelectorMismatchFmt, node.Name, node.Labels)
		return unschedulableRetry, s.markUnschedulable(ctx, pod, msg)
	}
	err = s.node.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node.Name},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Deleted, or bound by someone else meanwhile.
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("binding the pod: %w", err)
	}
	log.FromContext(ctx).V(1).Info("Bound pod", "pod", key.String())
	s.node.recorder.Eventf(pod, corev1.EventTypeNormal, eventScheduled, "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node.Name)
	return 0, nil
}

// markUnschedulable sets PodScheduled=False with reason Unschedulable, as kube-scheduler does,
// and announces it with a FailedScheduling event, once per distinct message.
func (s *scheduler) markUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	isSame := func(p *corev1.Pod) bool {
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
		return i >= 0 && p.Status.Conditions[i].Status == corev1.ConditionFalse &&
			p.Status.Conditions[i].Reason == reasonUnschedulable && p.Status.Conditions[i].Message == msg
	}
	if isSame(pod) {
		return nil
	}
	pods := s.node.client.CoreV1().Pods(pod.Namespace)
	current := pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := current.DeepCopy()
		cond := corev1.PodCondition{
			Type:               corev1.PodScheduled,
			Status:             corev1.ConditionFalse,
			Reason:             reasonUnschedulable,
			Message:            msg,
			LastTransitionTime: metav1.NewTime(s.node.cfg.Clock.Now()),
		}
		if i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }); i >= 0 {
			if p.Status.Conditions[i].Status == cond.Status {
				cond.LastTransitionTime = p.Status.Conditions[i].LastTransitionTime
			}
			p.Status.Conditions[i] = cond
		} else {
			p.Status.Conditions = append(p.Status.Conditions, cond)
		}
		_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			fresh, getErr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			if fresh.UID != pod.UID || !forDefaultScheduler(fresh) {
				return nil
			}
			current = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("marking the pod unschedulable: %w", err)
	}
	s.node.recorder.Event(pod, corev1.EventTypeWarning, eventFailedScheduling, msg)
	return nil
}
