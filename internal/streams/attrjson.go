package streams

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The attribute value codec writes DynamoDB's own JSON shape ({"S":"x"}, {"N":"1"},
// {"M":{...}} ...). It is lossless where attributevalue.Marshal into Go values is not:
// numbers stay decimal strings (no float rounding), binary stays binary (base64 in JSON),
// and sets stay sets rather than becoming lists.

func encodeAttrMap(m map[string]types.AttributeValue) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		ev, err := encodeAttr(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = ev
	}
	return out, nil
}

func encodeAttr(av types.AttributeValue) (any, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}, nil
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}, nil
	case *types.AttributeValueMemberB:
		return map[string]any{"B": nonNilBytes(v.Value)}, nil
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}, nil
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}, nil
	case *types.AttributeValueMemberM:
		m, err := encodeAttrMap(v.Value)
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]any{}
		}
		return map[string]any{"M": m}, nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			ev, err := encodeAttr(e)
			if err != nil {
				return nil, fmt.Errorf("index %d: %w", i, err)
			}
			l[i] = ev
		}
		return map[string]any{"L": l}, nil
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": nonNilStrings(v.Value)}, nil
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": nonNilStrings(v.Value)}, nil
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = nonNilBytes(b)
		}
		return map[string]any{"BS": bs}, nil
	case nil:
		return nil, fmt.Errorf("nil attribute value")
	default:
		return nil, fmt.Errorf("unsupported attribute value type %T", av)
	}
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func decodeAttrMap(raw map[string]json.RawMessage) (map[string]types.AttributeValue, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(raw))
	for k, v := range raw {
		av, err := decodeAttr(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func decodeAttr(raw json.RawMessage) (types.AttributeValue, error) {
	var tagged map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tagged); err != nil {
		return nil, fmt.Errorf("attribute value: %w", err)
	}
	if len(tagged) != 1 {
		return nil, fmt.Errorf("attribute value must have exactly one type tag, has %d", len(tagged))
	}
	var tag string
	var body json.RawMessage
	for t, b := range tagged { // the only entry
		tag, body = t, b
	}
	switch tag {
	case "S":
		var s string
		err := json.Unmarshal(body, &s)
		return &types.AttributeValueMemberS{Value: s}, wrapTag(tag, err)
	case "N":
		var s string
		err := json.Unmarshal(body, &s)
		return &types.AttributeValueMemberN{Value: s}, wrapTag(tag, err)
	case "B":
		var b []byte
		err := json.Unmarshal(body, &b)
		return &types.AttributeValueMemberB{Value: nonNilBytes(b)}, wrapTag(tag, err)
	case "BOOL":
		var b bool
		err := json.Unmarshal(body, &b)
		return &types.AttributeValueMemberBOOL{Value: b}, wrapTag(tag, err)
	case "NULL":
		var b bool
		err := json.Unmarshal(body, &b)
		return &types.AttributeValueMemberNULL{Value: b}, wrapTag(tag, err)
	case "M":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, wrapTag(tag, err)
		}
		dm, err := decodeAttrMap(m)
		if err != nil {
			return nil, err
		}
		if dm == nil {
			dm = map[string]types.AttributeValue{}
		}
		return &types.AttributeValueMemberM{Value: dm}, nil
	case "L":
		var l []json.RawMessage
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, wrapTag(tag, err)
		}
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			av, err := decodeAttr(e)
			if err != nil {
				return nil, fmt.Errorf("index %d: %w", i, err)
			}
			out[i] = av
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case "SS":
		var s []string
		err := json.Unmarshal(body, &s)
		return &types.AttributeValueMemberSS{Value: nonNilStrings(s)}, wrapTag(tag, err)
	case "NS":
		var s []string
		err := json.Unmarshal(body, &s)
		return &types.AttributeValueMemberNS{Value: nonNilStrings(s)}, wrapTag(tag, err)
	case "BS":
		var bs [][]byte
		if err := json.Unmarshal(body, &bs); err != nil {
			return nil, wrapTag(tag, err)
		}
		for i := range bs {
			bs[i] = nonNilBytes(bs[i])
		}
		if bs == nil {
			bs = [][]byte{}
		}
		return &types.AttributeValueMemberBS{Value: bs}, nil
	default:
		return nil, fmt.Errorf("unknown attribute value type tag %q", tag)
	}
}

func wrapTag(tag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("attribute value %s: %w", tag, err)
}

// fromStreamAttrMap converts the Streams SDK's attribute values to the DynamoDB SDK's, so
// that handlers work with one type everywhere (attributevalue.UnmarshalMap takes the
// latter), with the SDK's own converter. The one difference kept: an absent image (a
// record without NewImage or OldImage) stays nil, where the SDK's would be an empty map
// and read as an item without attributes.
func fromStreamAttrMap(m map[string]stypes.AttributeValue) (map[string]types.AttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	return attributevalue.FromDynamoDBStreamsMap(m)
}
