package admin

import (
	"net/http"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// topicBacklogQuota is a topic's own backlog quotas: POST and DELETE
// .../backlogQuota?backlogQuotaType=destination_storage|message_age (the
// type defaults to destination_storage, as the namespace's), GET
// .../backlogQuotaMap (also .../backlogQuota) for the map by type; with
// ?applied=true the namespace's map when the topic sets none. Each type
// the topic sets replaces the namespace's quota of that type.
var topicBacklogQuota = topicPolicy{
	path: "backlogQuota",
	get: func(tp *policy.TopicPolicies) any {
		if len(tp.BackLogQuotaMap) == 0 {
			return nil
		}
		return tp.BackLogQuotaMap
	},
	set: func(r *http.Request, body []byte, tp *policy.TopicPolicies) error {
		t, err := quotaType(r)
		if err != nil {
			return err
		}
		var q policy.BacklogQuota
		if err := decodeValue(body, &q); err != nil {
			return err
		}
		if err := q.Validate(); err != nil {
			return badRequestf("backlog quota %s: %v", t, err)
		}
		if tp.BackLogQuotaMap == nil {
			tp.BackLogQuotaMap = map[string]policy.BacklogQuota{}
		}
		tp.BackLogQuotaMap[t] = q
		return nil
	},
	removeFor: func(r *http.Request, tp *policy.TopicPolicies) error {
		t, err := quotaType(r)
		if err != nil {
			return err
		}
		delete(tp.BackLogQuotaMap, t)
		if len(tp.BackLogQuotaMap) == 0 {
			tp.BackLogQuotaMap = nil
		}
		return nil
	},
	nsField: "backlog_quota_map",
	def:     constant(map[string]policy.BacklogQuota{}),
}
