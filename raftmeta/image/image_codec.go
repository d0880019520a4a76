package image

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

// An image snapshot is the image written as the records that rebuild it, as
// Kafka's metadata snapshots are:
//
//	byte 0   format version (1)
//	         cluster ID (string), offset (uvarint)
//	         record count and length-prefixed records
const imageFormatVersion = 1

// Records returns records that, applied in order to NewImage of the same
// cluster, rebuild img. The order is deterministic, so equal images encode
// to equal bytes.
func (img *Image) Records() []Record {
	var recs []Record
	names := slices.Sorted(maps.Keys(img.features))
	for _, name := range names {
		recs = append(recs, &FeatureLevelRecord{Name: name, Level: img.features[name]})
	}
	for _, b := range img.Brokers() {
		recs = append(recs, &RegisterBrokerRecord{
			BrokerID:      b.ID,
			IncarnationID: b.IncarnationID,
			Epoch:         b.Epoch,
			Listeners:     b.Listeners,
			Rack:          b.Rack,
			Fenced:        b.Fenced,
		})
	}
	resources := slices.Sorted(maps.Keys(img.brokerConfigs))
	for _, res := range resources {
		recs = appendConfigRecords(recs, ResourceBroker, res, img.brokerConfigs[res])
	}
	for _, g := range slices.Sorted(maps.Keys(img.groupConfigs)) {
		recs = appendConfigRecords(recs, ResourceGroup, g, img.groupConfigs[g])
	}
	for _, t := range img.Topics() {
		recs = append(recs, &TopicRecord{Name: t.Name, ID: t.ID})
		recs = appendConfigRecords(recs, ResourceTopic, t.Name, t.Configs)
		for _, p := range t.Partitions {
			recs = append(recs, &PartitionRecord{
				TopicID:          t.ID,
				Partition:        p.Partition,
				Replicas:         p.Replicas,
				ISR:              p.ISR,
				Leader:           p.Leader,
				LeaderEpoch:      p.LeaderEpoch,
				PartitionEpoch:   p.PartitionEpoch,
				AddingReplicas:   p.AddingReplicas,
				RemovingReplicas: p.RemovingReplicas,
			})
		}
	}
	recs = append(recs, img.scramRecords()...)
	recs = append(recs, img.quotaRecords()...)
	recs = img.appendACLRecords(recs)
	if img.nextProducerID > 0 {
		recs = append(recs, &ProducerIDsRecord{BrokerID: -1, BrokerEpoch: -1, NextProducerID: img.nextProducerID})
	}
	return recs
}

func appendConfigRecords(recs []Record, typ int8, name string, cfg map[string]string) []Record {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		recs = append(recs, &ConfigRecord{ResourceType: typ, ResourceName: name, Name: k, Value: &v})
	}
	return recs
}

// EncodeImage returns the snapshot form of img.
func EncodeImage(img *Image) []byte {
	e := compact.Encoder{Buf: []byte{imageFormatVersion}}
	e.Str(img.ClusterID)
	e.Uvarint(img.offset)
	return AppendRecords(e.Buf, img.Records())
}

// DecodeImage rebuilds an image from its snapshot form, checking every
// record as Apply does.
func DecodeImage(b []byte) (*Image, error) {
	if len(b) == 0 || b[0] != imageFormatVersion {
		return nil, fmt.Errorf("decode image: unknown format")
	}
	d := compact.Decoder{Buf: b[1:]}
	clusterID := d.Str()
	offset := d.Uvarint()
	if d.Err != nil {
		return nil, fmt.Errorf("decode image header: %w", d.Err)
	}
	recs, err := DecodeRecords(d.Buf)
	if err != nil {
		return nil, fmt.Errorf("decode image: %w", err)
	}
	img, err := NewImage(clusterID).Apply(offset, recs...)
	if err != nil {
		return nil, fmt.Errorf("decode image: %w", err)
	}
	return img, nil
}
