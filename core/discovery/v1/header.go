package discv1

// LeaderHeader is the response header a leading controller sends as soon as it has accepted a
// stream. A proxy already serving the leader's current snapshot gets no Push on a new stream (the
// leader skips a version the Hello says is served), so without this header it could not tell an
// open stream from one still waiting: after a failover or an outage it would report itself
// disconnected until the next change. A standby or refusing controller ends the stream without it.
const LeaderHeader = "coxswain-discovery-leader"
