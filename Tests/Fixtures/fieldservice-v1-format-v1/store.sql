PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
INSERT INTO chronicle_meta VALUES('created_at',1780000000000);
INSERT INTO chronicle_meta VALUES('cursor',25);
INSERT INTO chronicle_meta VALUES('device_id','16b7b92f-7010-44f1-9b4e-23b99c6e5100');
INSERT INTO chronicle_meta VALUES('format_version',1);
INSERT INTO chronicle_meta VALUES('last_device_seq',13);
INSERT INTO chronicle_meta VALUES('library_id','3e7f0c9c-7022-48a2-9f91-11e4b22b3495');
INSERT INTO chronicle_meta VALUES('schema_fingerprint','fefbdd07443640a6809d3ca37a5d858545a5eb9e4e6f8fe68132e725ce308e45');
INSERT INTO chronicle_meta VALUES('schema_name','fieldservice');
INSERT INTO chronicle_meta VALUES('schema_version',1);
CREATE TABLE chronicle_log (
  server_seq INTEGER PRIMARY KEY,
  op_id TEXT NOT NULL UNIQUE,
  device_id TEXT NOT NULL,
  device_seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  version INTEGER NOT NULL,
  entity_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  device_time INTEGER NOT NULL,
  base_seq INTEGER NOT NULL,
  server_time INTEGER NOT NULL
);
INSERT INTO chronicle_log VALUES(1,'b396d0da-8541-487a-bb41-e5cad3539a49','21cef29c-d862-4714-ae54-f2b0d7f83f2b',1,'job.create',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"address":"fixture text 3 ünïcode ✓","customer":"fixture text 2 ünïcode ✓","notes":"fixture text 6 ünïcode ✓","scheduled_at":5,"status":"cancelled","title":"fixture text 1 ünïcode ✓"}',1780000060000,0,1780000060000);
INSERT INTO chronicle_log VALUES(2,'36361ab6-2cde-4e08-8927-cfafec499c3d','21cef29c-d862-4714-ae54-f2b0d7f83f2b',2,'part.add',1,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','{"job_id":"cfbb105d-19d4-4ea0-8392-8c98f0037127","name":"fixture text 9 ünïcode ✓","sku":"fixture text 8 ünïcode ✓"}',1780000120000,1,1780000120000);
INSERT INTO chronicle_log VALUES(3,'786a1ed5-b539-45d6-986d-34bd88019409','21cef29c-d862-4714-ae54-f2b0d7f83f2b',3,'photo.attach',1,'d0039723-8f95-4af5-85e0-426c4f64b325','{"blob_ref":"fixture text 11 ünïcode ✓","caption":"fixture text 12 ünïcode ✓","job_id":"cfbb105d-19d4-4ea0-8392-8c98f0037127"}',1780000180000,2,1780000180000);
INSERT INTO chronicle_log VALUES(4,'0af9b436-ea6d-415d-b505-570ccb5c029e','21cef29c-d862-4714-ae54-f2b0d7f83f2b',4,'signature.capture',1,'03021c83-1ce9-4172-9649-7d8042054d61','{"blob_ref":"fixture text 15 ünïcode ✓","job_id":"cfbb105d-19d4-4ea0-8392-8c98f0037127","signer":"fixture text 14 ünïcode ✓"}',1780000240000,3,1780000240000);
INSERT INTO chronicle_log VALUES(5,'f68b00d1-5ca7-44a8-bce8-c8dc1fe1f3ad','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1,'job.update',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"address":"fixture text 18 ünïcode ✓","customer":"fixture text 17 ünïcode ✓","notes":"fixture text 21 ünïcode ✓","scheduled_at":20,"status":"cancelled","title":"fixture text 16 ünïcode ✓"}',1780000300000,4,1780000300000);
INSERT INTO chronicle_log VALUES(6,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',2,'job.assign',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"member":"tag0"}',1780000360000,5,1780000360000);
INSERT INTO chronicle_log VALUES(7,'7ece7bde-bf51-4bdf-b71d-d6cab367b98e','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',3,'job.unassign',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"member":"tag0"}',1780000420000,6,1780000420000);
INSERT INTO chronicle_log VALUES(8,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',4,'job.delete',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{}',1780000480000,7,1780000480000);
INSERT INTO chronicle_log VALUES(9,'645e8a57-f267-4370-917f-b64c8d14a50c','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',5,'part.adjust',1,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','{"delta":3}',1780000540000,8,1780000540000);
INSERT INTO chronicle_log VALUES(10,'d203cf7f-0abe-4d0c-97d9-3e8469c01e2f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',6,'part.delete',1,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','{}',1780000600000,9,1780000600000);
INSERT INTO chronicle_log VALUES(11,'9749b8cf-0044-46b0-9b54-79a995e3d37a','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',7,'photo.caption',1,'d0039723-8f95-4af5-85e0-426c4f64b325','{"caption":"fixture text 22 ünïcode ✓"}',1780000660000,10,1780000660000);
INSERT INTO chronicle_log VALUES(12,'a3324d33-d998-4685-b93a-f35c8e260008','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',8,'photo.delete',1,'d0039723-8f95-4af5-85e0-426c4f64b325','{}',1780000720000,11,1780000720000);
INSERT INTO chronicle_log VALUES(13,'5a0d9697-e090-427e-a790-ff392b4743e1','21cef29c-d862-4714-ae54-f2b0d7f83f2b',5,'job.restore',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{}',1780000780000,12,1780000780000);
INSERT INTO chronicle_log VALUES(14,'d5a3f188-8693-454d-8d90-37b362275e04','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',9,'job.create',1,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','{"address":"fixture text 25 ünïcode ✓","customer":"fixture text 24 ünïcode ✓","notes":"fixture text 28 ünïcode ✓","scheduled_at":27,"status":"scheduled","title":"fixture text 23 ünïcode ✓"}',1780000840000,13,1780000840000);
INSERT INTO chronicle_log VALUES(15,'63265e99-bf85-4e49-8c63-0867e2bbd220','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',10,'part.add',1,'31f599c9-6797-42a6-af79-141c6dbdc243','{"job_id":"8d61ae05-2cf2-45c2-8edc-8948eec3440a","name":"fixture text 31 ünïcode ✓","sku":"fixture text 30 ünïcode ✓"}',1780000900000,14,1780000900000);
INSERT INTO chronicle_log VALUES(16,'d226212a-15a4-4b6f-b441-5cb41301441f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',11,'photo.attach',1,'1ce54ec9-7c09-4362-a82c-b582871abb2e','{"blob_ref":"fixture text 33 ünïcode ✓","caption":"fixture text 34 ünïcode ✓","job_id":"8d61ae05-2cf2-45c2-8edc-8948eec3440a"}',1780000960000,15,1780000960000);
INSERT INTO chronicle_log VALUES(17,'1b12205a-dfff-4432-b0cb-151f57ea2b95','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',12,'signature.capture',1,'9159c1d9-a6ca-4e47-a009-5be2ab79d7af','{"blob_ref":"fixture text 37 ünïcode ✓","job_id":"8d61ae05-2cf2-45c2-8edc-8948eec3440a","signer":"fixture text 36 ünïcode ✓"}',1780001020000,16,1780001020000);
INSERT INTO chronicle_log VALUES(18,'348e2ea3-309e-4ea6-894a-8ae8e44be0f3','21cef29c-d862-4714-ae54-f2b0d7f83f2b',6,'job.update',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"address":"fixture text 40 ünïcode ✓","customer":"fixture text 39 ünïcode ✓","notes":"fixture text 43 ünïcode ✓","scheduled_at":42,"status":"scheduled","title":"fixture text 38 ünïcode ✓"}',1780001080000,17,1780001080000);
INSERT INTO chronicle_log VALUES(19,'641a79a5-4c83-427b-a94a-ce05f1b1f28b','21cef29c-d862-4714-ae54-f2b0d7f83f2b',7,'job.assign',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"member":"tag1"}',1780001140000,18,1780001140000);
INSERT INTO chronicle_log VALUES(20,'3897125c-e4d6-4984-b24b-38bdb3b62b94','21cef29c-d862-4714-ae54-f2b0d7f83f2b',8,'job.unassign',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{"member":"tag1"}',1780001200000,19,1780001200000);
INSERT INTO chronicle_log VALUES(21,'5ec073b8-896d-4004-9bbd-ef2e474e7720','21cef29c-d862-4714-ae54-f2b0d7f83f2b',9,'job.delete',1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','{}',1780001260000,20,1780001260000);
INSERT INTO chronicle_log VALUES(22,'e949c2a3-2f74-4cd2-ae09-0322f2f688a4','21cef29c-d862-4714-ae54-f2b0d7f83f2b',10,'part.adjust',1,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','{"delta":3}',1780001320000,21,1780001320000);
INSERT INTO chronicle_log VALUES(23,'cdda1e61-60c1-45cb-ad17-92b3513dd7c2','21cef29c-d862-4714-ae54-f2b0d7f83f2b',11,'part.delete',1,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','{}',1780001380000,22,1780001380000);
INSERT INTO chronicle_log VALUES(24,'b5b6d0c8-5528-44db-9d44-b8c481752f9c','21cef29c-d862-4714-ae54-f2b0d7f83f2b',12,'photo.caption',1,'d0039723-8f95-4af5-85e0-426c4f64b325','{"caption":"fixture text 44 ünïcode ✓"}',1780001440000,23,1780001440000);
INSERT INTO chronicle_log VALUES(25,'f082c6d7-e0ca-46d0-bb43-3967d7fb0d6c','21cef29c-d862-4714-ae54-f2b0d7f83f2b',13,'photo.delete',1,'d0039723-8f95-4af5-85e0-426c4f64b325','{}',1780001500000,24,1780001500000);
CREATE TABLE chronicle_outbox (
  device_seq INTEGER PRIMARY KEY,
  op_id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  version INTEGER NOT NULL,
  entity_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  device_time INTEGER NOT NULL,
  base_seq INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT
);
INSERT INTO chronicle_outbox VALUES(1,'680a88c0-321c-41f1-8643-6f4c48406223','job.create',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{"address":"fixture text 47 ünïcode ✓","customer":"fixture text 46 ünïcode ✓","notes":"fixture text 50 ünïcode ✓","scheduled_at":49,"status":"done","title":"fixture text 45 ünïcode ✓"}',1780001501000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(2,'f10f1713-a9fd-4c63-afc8-171a976bb4de','job.update',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{"address":"fixture text 53 ünïcode ✓","customer":"fixture text 52 ünïcode ✓","notes":"fixture text 56 ünïcode ✓","scheduled_at":55,"status":"cancelled","title":"fixture text 51 ünïcode ✓"}',1780001502000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(3,'3d34395a-7cad-4b80-a2e3-25983072b878','job.assign',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{"member":"tag2"}',1780001503000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(4,'927ceedd-6b95-460f-864f-ae52b2c237ff','job.unassign',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{"member":"tag2"}',1780001504000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(5,'2358aeec-57fc-4c11-bf3d-83c6485de489','job.delete',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{}',1780001505000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(6,'a650fcc6-01fb-49f2-9f95-2cf10593fa01','job.restore',1,'75d1d675-2042-49d2-843a-2a0611b81c74','{}',1780001506000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(7,'ec5bed08-2029-49ca-b03a-874a1ba266ee','part.add',1,'494415ef-deb0-418e-bbd5-b07a1fe7c097','{"job_id":"75d1d675-2042-49d2-843a-2a0611b81c74","name":"fixture text 59 ünïcode ✓","sku":"fixture text 58 ünïcode ✓"}',1780001507000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(8,'61fb8bab-2ed4-4e13-bbf3-3ff5fdd567e5','part.adjust',1,'494415ef-deb0-418e-bbd5-b07a1fe7c097','{"delta":3}',1780001508000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(9,'d274d2a9-75a8-4fe4-973c-7162c511b48e','part.delete',1,'494415ef-deb0-418e-bbd5-b07a1fe7c097','{}',1780001509000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(10,'659f3c08-b78a-4a06-a7e5-e66e8d0c8e07','photo.attach',1,'0f8f831d-f8bf-40f0-9ffa-88260292f8c1','{"blob_ref":"fixture text 61 ünïcode ✓","caption":"fixture text 62 ünïcode ✓","job_id":"75d1d675-2042-49d2-843a-2a0611b81c74"}',1780001510000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(11,'06e65eda-ce55-49bf-bcbd-2229e0e74090','photo.caption',1,'0f8f831d-f8bf-40f0-9ffa-88260292f8c1','{"caption":"fixture text 63 ünïcode ✓"}',1780001511000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(12,'2f183225-4391-4908-a843-e13d3c966a72','photo.delete',1,'0f8f831d-f8bf-40f0-9ffa-88260292f8c1','{}',1780001512000,25,0,NULL);
INSERT INTO chronicle_outbox VALUES(13,'db25bd78-bf9d-4376-a370-a3c5ebc77372','signature.capture',1,'57b54c71-da9a-4b51-bec8-d06ac916711a','{"blob_ref":"fixture text 66 ünïcode ✓","job_id":"75d1d675-2042-49d2-843a-2a0611b81c74","signer":"fixture text 65 ünïcode ✓"}',1780001513000,25,0,NULL);
CREATE TABLE chronicle_shadowed (entity TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID;
INSERT INTO chronicle_shadowed VALUES('job','75d1d675-2042-49d2-843a-2a0611b81c74');
INSERT INTO chronicle_shadowed VALUES('part','494415ef-deb0-418e-bbd5-b07a1fe7c097');
INSERT INTO chronicle_shadowed VALUES('photo','0f8f831d-f8bf-40f0-9ffa-88260292f8c1');
INSERT INTO chronicle_shadowed VALUES('signature','57b54c71-da9a-4b51-bec8-d06ac916711a');
CREATE TABLE IF NOT EXISTS "job" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "title" TEXT,
  "customer" TEXT,
  "address" TEXT,
  "status" TEXT,
  "scheduled_at" INTEGER,
  "notes" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO job VALUES('cfbb105d-19d4-4ea0-8392-8c98f0037127',1780000060000,'fixture text 38 ünïcode ✓','fixture text 39 ünïcode ✓','fixture text 40 ünïcode ✓','scheduled',42,'fixture text 43 ünïcode ✓',1780001260000);
INSERT INTO job VALUES('8d61ae05-2cf2-45c2-8edc-8948eec3440a',1780000840000,'fixture text 23 ünïcode ✓','fixture text 24 ünïcode ✓','fixture text 25 ünïcode ✓','scheduled',27,'fixture text 28 ünïcode ✓',NULL);
INSERT INTO job VALUES('75d1d675-2042-49d2-843a-2a0611b81c74',1780001501000,'fixture text 51 ünïcode ✓','fixture text 52 ünïcode ✓','fixture text 53 ünïcode ✓','cancelled',55,'fixture text 56 ünïcode ✓',NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_job" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "title" TEXT,
  "customer" TEXT,
  "address" TEXT,
  "status" TEXT,
  "scheduled_at" INTEGER,
  "notes" TEXT,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "job_crew" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "chronicle_shadow_job_crew" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "part" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "sku" TEXT,
  "name" TEXT,
  "quantity" INTEGER,
  "deleted_at" INTEGER
);
INSERT INTO part VALUES('e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77',1780000120000,'cfbb105d-19d4-4ea0-8392-8c98f0037127','fixture text 8 ünïcode ✓','fixture text 9 ünïcode ✓',6,1780001380000);
INSERT INTO part VALUES('31f599c9-6797-42a6-af79-141c6dbdc243',1780000900000,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','fixture text 30 ünïcode ✓','fixture text 31 ünïcode ✓',0,NULL);
INSERT INTO part VALUES('494415ef-deb0-418e-bbd5-b07a1fe7c097',1780001507000,'75d1d675-2042-49d2-843a-2a0611b81c74','fixture text 58 ünïcode ✓','fixture text 59 ünïcode ✓',3,1780001509000);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_part" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "sku" TEXT,
  "name" TEXT,
  "quantity" INTEGER,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "photo" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "blob_ref" TEXT,
  "caption" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO photo VALUES('d0039723-8f95-4af5-85e0-426c4f64b325',1780000180000,'cfbb105d-19d4-4ea0-8392-8c98f0037127','fixture text 11 ünïcode ✓','fixture text 44 ünïcode ✓',1780001500000);
INSERT INTO photo VALUES('1ce54ec9-7c09-4362-a82c-b582871abb2e',1780000960000,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','fixture text 33 ünïcode ✓','fixture text 34 ünïcode ✓',NULL);
INSERT INTO photo VALUES('0f8f831d-f8bf-40f0-9ffa-88260292f8c1',1780001510000,'75d1d675-2042-49d2-843a-2a0611b81c74','fixture text 61 ünïcode ✓','fixture text 63 ünïcode ✓',1780001512000);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_photo" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "blob_ref" TEXT,
  "caption" TEXT,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "signature" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "signer" TEXT,
  "blob_ref" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO signature VALUES('03021c83-1ce9-4172-9649-7d8042054d61',1780000240000,'cfbb105d-19d4-4ea0-8392-8c98f0037127','fixture text 14 ünïcode ✓','fixture text 15 ünïcode ✓',NULL);
INSERT INTO signature VALUES('9159c1d9-a6ca-4e47-a009-5be2ab79d7af',1780001020000,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','fixture text 36 ünïcode ✓','fixture text 37 ünïcode ✓',NULL);
INSERT INTO signature VALUES('57b54c71-da9a-4b51-bec8-d06ac916711a',1780001513000,'75d1d675-2042-49d2-843a-2a0611b81c74','fixture text 65 ünïcode ✓','fixture text 66 ünïcode ✓',NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_signature" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "job_id" TEXT,
  "signer" TEXT,
  "blob_ref" TEXT,
  "deleted_at" INTEGER
);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','job_fts','job_fts',0,'CREATE VIRTUAL TABLE "job_fts" USING fts5("title", "customer", "address", "notes", content="job_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'job_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO job_fts_data VALUES(1,X'0208080808');
INSERT INTO job_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO job_fts_data VALUES(137438953473,X'000000e3033032330202040201340206010104020135020601020402013802060103040107666978747572650214020101020102020103020104746578740214030101030102030103030107756e69636f6465021405010105010205010305000331323302020402013402060101040201350206010204020138020601030401026669021402010102010202010302010274650214030101030102030103030102756e02140501010501020501030500043266697802140201010201020201030201037465780214030101030102030103030103756e690214050101050102050103050407080808151215080808081010101211');
INSERT INTO job_fts_data VALUES(274877906945,X'000000e503303435030204020136030601010402013703060102040102353003060103040107666978747572650314020101020102020103020104746578740314030101030102030103030107756e69636f646503140501010501020501030500033134350302040201360306010104020137030601020401023530030601030401026669031402010102010202010302010274650314030101030102030103030102756e03140501010501020501030500043266697803140201010201020201030201037465780314030101030102030103030103756e690314050101050102050103050407080809151215080808091010101211');
INSERT INTO job_fts_data VALUES(412316860417,X'0000010d033034350301020136030102013703010102353003010201310302040201320306010104020133030601020402013603060103040107666978747572650315020101020102020103020104746578740315030101030102030103030107756e69636f6465031505010105010205010305000331343503010201360301020137030101023530030102013103020402013203060101040201330306010204020136030601030401026669031502010102010202010302010274650315030101030102030103030102756e03150501010501020501030500043266697803150201010201020201030201037465780315030101030102030103030103756e6903150501010501020501030504060505060608080815121507050506060808081010101211');
INSERT INTO job_fts_data VALUES(549755813889,X'00000075033035310301020132030102013303010201360301010766697874757265030101047465787403010107756e69636f64650301000331353103010201320301020133030102013603010102666903010102746503010102756e03010004326669780301010374657803010103756e69030104060505050b080b070505050606060807');
INSERT INTO job_fts_data VALUES(687194767361,X'000000e3033035310302040201320306010104020133030601020402013603060103040107666978747572650314020101020102020103020104746578740314030101030102030103030107756e69636f6465031405010105010205010305000331353103020402013203060101040201330306010204020136030601030401026669031402010102010202010302010274650314030101030102030103030102756e03140501010501020501030500043266697803140201010201020201030201037465780314030101030102030103030103756e690314050101050102050103050407080808151215080808081010101211');
CREATE TABLE IF NOT EXISTS 'job_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO job_fts_idx VALUES(1,X'',2);
INSERT INTO job_fts_idx VALUES(2,X'',2);
INSERT INTO job_fts_idx VALUES(3,X'',2);
INSERT INTO job_fts_idx VALUES(4,X'',2);
INSERT INTO job_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'job_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO job_fts_docsize VALUES(2,X'04040404');
INSERT INTO job_fts_docsize VALUES(3,X'04040404');
CREATE TABLE IF NOT EXISTS 'job_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO job_fts_config VALUES('rank','bm25(10.0, 5.0, 3.0, 1.0)');
INSERT INTO job_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','part_fts','part_fts',0,'CREATE VIRTUAL TABLE "part_fts" USING fts5("sku", "name", content="part_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'part_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO part_fts_data VALUES(1,X'010404');
INSERT INTO part_fts_data VALUES(10,X'000000010103030003010101020101030101');
INSERT INTO part_fts_data VALUES(137438953473,X'0000008d0330333002020402013102060101040107666978747572650208020101020104746578740208030101030107756e69636f64650208050101050003313330020204020131020601010401026669020802010102010274650208030101030102756e02080501010500043266697802080201010201037465780208030101030103756e690208050101050407080f0c0f08080a0a0a0c0b');
INSERT INTO part_fts_data VALUES(274877906945,X'0000008d0330353803020402013903060101040107666978747572650308020101020104746578740308030101030107756e69636f64650308050101050003313538030204020139030601010401026669030802010102010274650308030101030102756e03080501010500043266697803080201010201037465780308030101030103756e690308050101050407080f0c0f08080a0a0a0c0b');
INSERT INTO part_fts_data VALUES(412316860417,X'000000610330353803010201390301010766697874757265030101047465787403010107756e69636f646503010003313538030102013903010102666903010102746503010102756e03010004326669780301010374657803010103756e6903010406050b080b07050606060807');
CREATE TABLE IF NOT EXISTS 'part_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO part_fts_idx VALUES(1,X'',2);
INSERT INTO part_fts_idx VALUES(2,X'',2);
INSERT INTO part_fts_idx VALUES(3,X'',2);
CREATE TABLE IF NOT EXISTS 'part_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO part_fts_docsize VALUES(2,X'0404');
CREATE TABLE IF NOT EXISTS 'part_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO part_fts_config VALUES('rank','bm25(5.0, 3.0)');
INSERT INTO part_fts_config VALUES('version',4);
CREATE INDEX chronicle_log_by_entity ON chronicle_log(entity_id, server_seq);
CREATE TRIGGER chronicle_log_append_only_update BEFORE UPDATE ON chronicle_log BEGIN
  SELECT RAISE(ABORT, 'chronicle_log is append-only: confirmed ops are never updated');
END;
CREATE TRIGGER chronicle_log_append_only_delete BEFORE DELETE ON chronicle_log BEGIN
  SELECT RAISE(ABORT, 'chronicle_log is append-only: confirmed ops are never deleted');
END;
CREATE TRIGGER chronicle_log_gap_free BEFORE INSERT ON chronicle_log
WHEN NEW.server_seq IS NOT (SELECT coalesce(max(server_seq), 0) + 1 FROM chronicle_log) BEGIN
  SELECT RAISE(ABORT, 'chronicle_log: server_seq must follow the last confirmed op without a gap');
END;
CREATE INDEX chronicle_outbox_by_entity ON chronicle_outbox(entity_id);
CREATE TRIGGER chronicle_outbox_gap_free BEFORE INSERT ON chronicle_outbox
WHEN NEW.device_seq IS NOT (SELECT value FROM chronicle_meta WHERE key = 'last_device_seq') + 1 BEGIN
  SELECT RAISE(ABORT, 'chronicle_outbox: device_seq must follow the last one without a gap');
END;
CREATE TRIGGER chronicle_outbox_once BEFORE INSERT ON chronicle_outbox
WHEN EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = NEW.op_id) BEGIN
  SELECT RAISE(ABORT, 'chronicle_outbox: this op id is already confirmed');
END;
CREATE TRIGGER chronicle_outbox_advance AFTER INSERT ON chronicle_outbox BEGIN
  UPDATE chronicle_meta SET value = NEW.device_seq WHERE key = 'last_device_seq';
END;
CREATE TRIGGER chronicle_outbox_leaves_when_confirmed BEFORE DELETE ON chronicle_outbox
WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id) BEGIN
  SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it');
END;
CREATE TRIGGER chronicle_outbox_fixed BEFORE UPDATE OF op_id, device_seq, type, version, entity_id, payload, device_time, base_seq ON chronicle_outbox BEGIN SELECT RAISE(ABORT, 'chronicle_outbox: queued ops are immutable'); END;
CREATE INDEX "job_crew_by_value" ON "job_crew"(value);
CREATE INDEX "part_by_job_id" ON "part"("job_id");
CREATE INDEX "photo_by_job_id" ON "photo"("job_id");
CREATE INDEX "signature_by_job_id" ON "signature"("job_id");
CREATE VIEW "job_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."customer" AS "customer", t."address" AS "address", t."notes" AS "notes" FROM "job" t WHERE t.deleted_at IS NULL;
CREATE VIEW "part_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t."job_id" AS owner_id, t."sku" AS "sku", t."name" AS "name" FROM "part" t JOIN "job" o ON o.id = t."job_id" WHERE t.deleted_at IS NULL AND o.deleted_at IS NULL;
PRAGMA writable_schema=OFF;
COMMIT;
