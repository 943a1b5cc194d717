# -*- coding: utf-8 -*-
# Protocol buffer code for kmsv2.proto, its FileDescriptorProto serialized by hand (no protoc here).
# NO CHECKED-IN PROTOBUF GENCODE
# source: kmsv2.proto
"""Generated protocol buffer code."""
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf import symbol_database as _symbol_database
from google.protobuf.internal import builder as _builder

_sym_db = _symbol_database.Default()


DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(b'\n\x0bkmsv2.proto\x12\x02v2"\x0f\n\rStatusRequest"[\n\x0eStatusResponse\x12\x18\n\x07version\x18\x01 \x01(\tR\x07version\x12\x18\n\x07healthz\x18\x02 \x01(\tR\x07healthz\x12\x15\n\x06key_id\x18\x03 \x01(\tR\x05keyId"\xe0\x01\n\x0eDecryptRequest\x12\x1e\n\nciphertext\x18\x01 \x01(\x0cR\nciphertext\x12\x10\n\x03uid\x18\x02 \x01(\tR\x03uid\x12\x15\n\x06key_id\x18\x03 \x01(\tR\x05keyId\x12E\n\x0bannotations\x18\x04 \x03(\x0b2#.v2.DecryptRequest.AnnotationsEntryR\x0bannotations\x1a>\n\x10AnnotationsEntry\x12\x10\n\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n\x05value\x18\x02 \x01(\x0cR\x05value:\x028\x01"/\n\x0fDecryptResponse\x12\x1c\n\tplaintext\x18\x01 \x01(\x0cR\tplaintext"@\n\x0eEncryptRequest\x12\x1c\n\tplaintext\x18\x01 \x01(\x0cR\tplaintext\x12\x10\n\x03uid\x18\x02 \x01(\tR\x03uid"\xd0\x01\n\x0fEncryptResponse\x12\x1e\n\nciphertext\x18\x01 \x01(\x0cR\nciphertext\x12\x15\n\x06key_id\x18\x02 \x01(\tR\x05keyId\x12F\n\x0bannotations\x18\x03 \x03(\x0b2$.v2.EncryptResponse.AnnotationsEntryR\x0bannotations\x1a>\n\x10AnnotationsEntry\x12\x10\n\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n\x05value\x18\x02 \x01(\x0cR\x05value:\x028\x01"\xd9\x02\n\x0fEncryptedObject\x12$\n\rencryptedData\x18\x01 \x01(\x0cR\rencryptedData\x12\x14\n\x05keyID\x18\x02 \x01(\tR\x05keyID\x12.\n\x12encryptedDEKSource\x18\x03 \x01(\x0cR\x12encryptedDEKSource\x12R\n\x16encryptedDEKSourceType\x18\x05 \x01(\x0e2\x1a.v2.EncryptedDEKSourceTypeR\x16encryptedDEKSourceType\x12F\n\x0bannotations\x18\x04 \x03(\x0b2$.v2.EncryptedObject.AnnotationsEntryR\x0bannotations\x1a>\n\x10AnnotationsEntry\x12\x10\n\x03key\x18\x01 \x01(\tR\x03key\x12\x14\n\x05value\x18\x02 \x01(\x0cR\x05value:\x028\x01*N\n\x16EncryptedDEKSourceType\x12\x0f\n\x0bAES_GCM_KEY\x10\x00\x12#\n\x1fHKDF_SHA256_XNONCE_AES_GCM_SEED\x10\x012\xaf\x01\n\x14KeyManagementService\x12/\n\x06Status\x12\x11.v2.StatusRequest\x1a\x12.v2.StatusResponse\x122\n\x07Decrypt\x12\x12.v2.DecryptRequest\x1a\x13.v2.DecryptResponse\x122\n\x07Encrypt\x12\x12.v2.EncryptRequest\x1a\x13.v2.EncryptResponseb\x06proto3')

_globals = globals()
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'kmsv2_pb2', _globals)
