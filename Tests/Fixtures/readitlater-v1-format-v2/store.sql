PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
INSERT INTO chronicle_meta VALUES('acked_device_seq',0);
INSERT INTO chronicle_meta VALUES('created_at',1780000000000);
INSERT INTO chronicle_meta VALUES('cursor',51);
INSERT INTO chronicle_meta VALUES('device_id','16b7b92f-7010-44f1-9b4e-23b99c6e5100');
INSERT INTO chronicle_meta VALUES('format_version',2);
INSERT INTO chronicle_meta VALUES('last_device_seq',26);
INSERT INTO chronicle_meta VALUES('library_id','3e7f0c9c-7022-48a2-9f91-11e4b22b3495');
INSERT INTO chronicle_meta VALUES('schema_fingerprint','126383005bfbf00ab489fdcce5d94bffa7e5dc1df9b63188b921023061be7d3d');
INSERT INTO chronicle_meta VALUES('schema_name','readitlater');
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
INSERT INTO chronicle_log VALUES(1,'cfbb105d-19d4-4ea0-8392-8c98f0037127','00000000-0000-0000-0000-000000000000',1,'library.plan',1,'3e7f0c9c-7022-48a2-9f91-11e4b22b3495','{"plan":"premium"}',1780000060000,0,1780000060000);
INSERT INTO chronicle_log VALUES(2,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','21cef29c-d862-4714-ae54-f2b0d7f83f2b',1,'article.save',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"byline":"fixture text 4 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 3 ünïcode ✓","url":"https://example.com/fixture/2"}',1780000120000,1,1780000120000);
INSERT INTO chronicle_log VALUES(3,'d0039723-8f95-4af5-85e0-426c4f64b325','21cef29c-d862-4714-ae54-f2b0d7f83f2b',2,'highlight.create',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49","color":"yellow","note":"fixture text 11 ünïcode ✓","position":9,"quote":"fixture text 8 ünïcode ✓"}',1780000180000,2,1780000180000);
INSERT INTO chronicle_log VALUES(4,'03021c83-1ce9-4172-9649-7d8042054d61','21cef29c-d862-4714-ae54-f2b0d7f83f2b',3,'note.create',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49","body":"fixture text 13 ünïcode ✓"}',1780000240000,3,1780000240000);
INSERT INTO chronicle_log VALUES(5,'f68b00d1-5ca7-44a8-bce8-c8dc1fe1f3ad','21cef29c-d862-4714-ae54-f2b0d7f83f2b',4,'collection.create',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 14 ünïcode ✓","position":15.0}',1780000300000,4,1780000300000);
INSERT INTO chronicle_log VALUES(6,'7ece7bde-bf51-4bdf-b71d-d6cab367b98e','21cef29c-d862-4714-ae54-f2b0d7f83f2b',5,'episode.save',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 18 ünïcode ✓","duration":19.0,"feed":"https://example.com/fixture/17","title":"fixture text 16 ünïcode ✓","transcript":"fixture text 20 ünïcode ✓"}',1780000360000,5,1780000360000);
INSERT INTO chronicle_log VALUES(7,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1,'article.update',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"byline":"fixture text 22 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 21 ünïcode ✓"}',1780000420000,6,1780000420000);
INSERT INTO chronicle_log VALUES(8,'645e8a57-f267-4370-917f-b64c8d14a50c','00000000-0000-0000-0000-000000000000',2,'article.parsed',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"byline":"fixture text 26 ünïcode ✓","text":"fixture text 27 ünïcode ✓","title":"fixture text 25 ünïcode ✓","word_count":28}',1780000480000,7,1780000480000);
INSERT INTO chronicle_log VALUES(9,'d203cf7f-0abe-4d0c-97d9-3e8469c01e2f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',2,'article.progress',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"progress":0.29}',1780000540000,8,1780000540000);
INSERT INTO chronicle_log VALUES(10,'9749b8cf-0044-46b0-9b54-79a995e3d37a','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',3,'article.tag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag2"}',1780000600000,9,1780000600000);
INSERT INTO chronicle_log VALUES(11,'a3324d33-d998-4685-b93a-f35c8e260008','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',4,'article.untag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag2"}',1780000660000,10,1780000660000);
INSERT INTO chronicle_log VALUES(12,'5a0d9697-e090-427e-a790-ff392b4743e1','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',5,'article.delete',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780000720000,11,1780000720000);
INSERT INTO chronicle_log VALUES(13,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',6,'highlight.update',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"color":"yellow","note":"fixture text 31 ünïcode ✓"}',1780000780000,12,1780000780000);
INSERT INTO chronicle_log VALUES(14,'d5a3f188-8693-454d-8d90-37b362275e04','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',7,'highlight.delete',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780000840000,13,1780000840000);
INSERT INTO chronicle_log VALUES(15,'31f599c9-6797-42a6-af79-141c6dbdc243','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',8,'note.update',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"body":"fixture text 32 ünïcode ✓"}',1780000900000,14,1780000900000);
INSERT INTO chronicle_log VALUES(16,'63265e99-bf85-4e49-8c63-0867e2bbd220','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',9,'note.delete',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780000960000,15,1780000960000);
INSERT INTO chronicle_log VALUES(17,'1ce54ec9-7c09-4362-a82c-b582871abb2e','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',10,'collection.update',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 33 ünïcode ✓","position":34.0}',1780001020000,16,1780001020000);
INSERT INTO chronicle_log VALUES(18,'d226212a-15a4-4b6f-b441-5cb41301441f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',11,'collection.add',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49"}',1780001080000,17,1780001080000);
INSERT INTO chronicle_log VALUES(19,'9159c1d9-a6ca-4e47-a009-5be2ab79d7af','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',12,'collection.remove',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49"}',1780001140000,18,1780001140000);
INSERT INTO chronicle_log VALUES(20,'1b12205a-dfff-4432-b0cb-151f57ea2b95','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',13,'collection.delete',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780001200000,19,1780001200000);
INSERT INTO chronicle_log VALUES(21,'348e2ea3-309e-4ea6-894a-8ae8e44be0f3','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',14,'episode.update',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 39 ünïcode ✓","duration":40.0,"feed":"https://example.com/fixture/38","title":"fixture text 37 ünïcode ✓","transcript":"fixture text 41 ünïcode ✓"}',1780001260000,20,1780001260000);
INSERT INTO chronicle_log VALUES(22,'641a79a5-4c83-427b-a94a-ce05f1b1f28b','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',15,'episode.position',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"position":42.0}',1780001320000,21,1780001320000);
INSERT INTO chronicle_log VALUES(23,'3897125c-e4d6-4984-b24b-38bdb3b62b94','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',16,'episode.delete',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780001380000,22,1780001380000);
INSERT INTO chronicle_log VALUES(24,'5ec073b8-896d-4004-9bbd-ef2e474e7720','21cef29c-d862-4714-ae54-f2b0d7f83f2b',6,'article.restore',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780001440000,23,1780001440000);
INSERT INTO chronicle_log VALUES(25,'e949c2a3-2f74-4cd2-ae09-0322f2f688a4','21cef29c-d862-4714-ae54-f2b0d7f83f2b',7,'highlight.restore',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780001500000,24,1780001500000);
INSERT INTO chronicle_log VALUES(26,'cdda1e61-60c1-45cb-ad17-92b3513dd7c2','21cef29c-d862-4714-ae54-f2b0d7f83f2b',8,'note.restore',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780001560000,25,1780001560000);
INSERT INTO chronicle_log VALUES(27,'b5b6d0c8-5528-44db-9d44-b8c481752f9c','21cef29c-d862-4714-ae54-f2b0d7f83f2b',9,'collection.restore',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780001620000,26,1780001620000);
INSERT INTO chronicle_log VALUES(28,'f082c6d7-e0ca-46d0-bb43-3967d7fb0d6c','21cef29c-d862-4714-ae54-f2b0d7f83f2b',10,'episode.restore',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780001680000,27,1780001680000);
INSERT INTO chronicle_log VALUES(29,'75d1d675-2042-49d2-843a-2a0611b81c74','00000000-0000-0000-0000-000000000000',3,'library.plan',1,'3e7f0c9c-7022-48a2-9f91-11e4b22b3495','{"plan":"premium"}',1780001740000,28,1780001740000);
INSERT INTO chronicle_log VALUES(30,'f10f1713-a9fd-4c63-afc8-171a976bb4de','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',17,'article.save',1,'680a88c0-321c-41f1-8643-6f4c48406223','{"byline":"fixture text 46 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 45 ünïcode ✓","url":"https://example.com/fixture/44"}',1780001800000,29,1780001800000);
INSERT INTO chronicle_log VALUES(31,'927ceedd-6b95-460f-864f-ae52b2c237ff','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',18,'highlight.create',1,'3d34395a-7cad-4b80-a2e3-25983072b878','{"article_id":"680a88c0-321c-41f1-8643-6f4c48406223","color":"blue","note":"fixture text 53 ünïcode ✓","position":51,"quote":"fixture text 50 ünïcode ✓"}',1780001860000,30,1780001860000);
INSERT INTO chronicle_log VALUES(32,'a650fcc6-01fb-49f2-9f95-2cf10593fa01','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',19,'note.create',1,'2358aeec-57fc-4c11-bf3d-83c6485de489','{"article_id":"680a88c0-321c-41f1-8643-6f4c48406223","body":"fixture text 55 ünïcode ✓"}',1780001920000,31,1780001920000);
INSERT INTO chronicle_log VALUES(33,'ec5bed08-2029-49ca-b03a-874a1ba266ee','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',20,'collection.create',1,'494415ef-deb0-418e-bbd5-b07a1fe7c097','{"name":"fixture text 56 ünïcode ✓","position":57.0}',1780001980000,32,1780001980000);
INSERT INTO chronicle_log VALUES(34,'d274d2a9-75a8-4fe4-973c-7162c511b48e','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',21,'episode.save',1,'61fb8bab-2ed4-4e13-bbf3-3ff5fdd567e5','{"audio_ref":"fixture text 60 ünïcode ✓","duration":61.0,"feed":"https://example.com/fixture/59","title":"fixture text 58 ünïcode ✓","transcript":"fixture text 62 ünïcode ✓"}',1780002040000,33,1780002040000);
INSERT INTO chronicle_log VALUES(35,'0f8f831d-f8bf-40f0-9ffa-88260292f8c1','21cef29c-d862-4714-ae54-f2b0d7f83f2b',11,'article.update',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"byline":"fixture text 64 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 63 ünïcode ✓"}',1780002100000,34,1780002100000);
INSERT INTO chronicle_log VALUES(36,'659f3c08-b78a-4a06-a7e5-e66e8d0c8e07','00000000-0000-0000-0000-000000000000',4,'article.parsed',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"byline":"fixture text 68 ünïcode ✓","text":"fixture text 69 ünïcode ✓","title":"fixture text 67 ünïcode ✓","word_count":70}',1780002160000,35,1780002160000);
INSERT INTO chronicle_log VALUES(37,'06e65eda-ce55-49bf-bcbd-2229e0e74090','21cef29c-d862-4714-ae54-f2b0d7f83f2b',12,'article.progress',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"progress":0.71}',1780002220000,36,1780002220000);
INSERT INTO chronicle_log VALUES(38,'2f183225-4391-4908-a843-e13d3c966a72','21cef29c-d862-4714-ae54-f2b0d7f83f2b',13,'article.tag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag2"}',1780002280000,37,1780002280000);
INSERT INTO chronicle_log VALUES(39,'57b54c71-da9a-4b51-bec8-d06ac916711a','21cef29c-d862-4714-ae54-f2b0d7f83f2b',14,'article.untag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag2"}',1780002340000,38,1780002340000);
INSERT INTO chronicle_log VALUES(40,'db25bd78-bf9d-4376-a370-a3c5ebc77372','21cef29c-d862-4714-ae54-f2b0d7f83f2b',15,'article.delete',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780002400000,39,1780002400000);
INSERT INTO chronicle_log VALUES(41,'5d9eb5f4-8229-46ff-be7e-614619eeb3bf','21cef29c-d862-4714-ae54-f2b0d7f83f2b',16,'highlight.update',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"color":"blue","note":"fixture text 73 ünïcode ✓"}',1780002460000,40,1780002460000);
INSERT INTO chronicle_log VALUES(42,'26505b5b-239f-4544-bc66-e3f7bea14830','21cef29c-d862-4714-ae54-f2b0d7f83f2b',17,'highlight.delete',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780002520000,41,1780002520000);
INSERT INTO chronicle_log VALUES(43,'64848b10-11da-4696-a42b-f97e1e25a824','21cef29c-d862-4714-ae54-f2b0d7f83f2b',18,'note.update',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"body":"fixture text 74 ünïcode ✓"}',1780002580000,42,1780002580000);
INSERT INTO chronicle_log VALUES(44,'b7a444ad-4f76-43fe-8524-749f8c3b3121','21cef29c-d862-4714-ae54-f2b0d7f83f2b',19,'note.delete',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780002640000,43,1780002640000);
INSERT INTO chronicle_log VALUES(45,'76e1d70d-56c0-443c-9aa6-cecb33337e92','21cef29c-d862-4714-ae54-f2b0d7f83f2b',20,'collection.update',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 75 ünïcode ✓","position":76.0}',1780002700000,44,1780002700000);
INSERT INTO chronicle_log VALUES(46,'71fbc1a8-4009-4d09-a897-d67c0111663a','21cef29c-d862-4714-ae54-f2b0d7f83f2b',21,'collection.add',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"680a88c0-321c-41f1-8643-6f4c48406223"}',1780002760000,45,1780002760000);
INSERT INTO chronicle_log VALUES(47,'7b7f4ed6-548c-4f39-a29a-372140367eea','21cef29c-d862-4714-ae54-f2b0d7f83f2b',22,'collection.remove',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"680a88c0-321c-41f1-8643-6f4c48406223"}',1780002820000,46,1780002820000);
INSERT INTO chronicle_log VALUES(48,'5d809f93-b74c-4e3d-8ec7-1ad29d63ba14','21cef29c-d862-4714-ae54-f2b0d7f83f2b',23,'collection.delete',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780002880000,47,1780002880000);
INSERT INTO chronicle_log VALUES(49,'e0257c46-dbd7-4c3c-ba0f-9bd5bd5e3220','21cef29c-d862-4714-ae54-f2b0d7f83f2b',24,'episode.update',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 81 ünïcode ✓","duration":82.0,"feed":"https://example.com/fixture/80","title":"fixture text 79 ünïcode ✓","transcript":"fixture text 83 ünïcode ✓"}',1780002940000,48,1780002940000);
INSERT INTO chronicle_log VALUES(50,'63fbba35-3ed2-4976-8fe9-fecec2f1db50','21cef29c-d862-4714-ae54-f2b0d7f83f2b',25,'episode.position',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"position":84.0}',1780003000000,49,1780003000000);
INSERT INTO chronicle_log VALUES(51,'0f6ab3db-9f3e-422b-9f39-b19e3ed0099b','21cef29c-d862-4714-ae54-f2b0d7f83f2b',26,'episode.delete',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780003060000,50,1780003060000);
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
INSERT INTO chronicle_outbox VALUES(1,'bf958ad6-c75a-45c9-9a6b-0fa9633b4df2','article.save',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{"byline":"fixture text 87 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 86 ünïcode ✓","url":"https://example.com/fixture/85"}',1780003061000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(2,'2d705a4f-7c48-454b-b9d5-a26adfe51081','article.update',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{"byline":"fixture text 91 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 90 ünïcode ✓"}',1780003062000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(3,'74795931-67b6-49a8-b530-2b69d16a49a9','article.progress',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{"progress":0.94}',1780003063000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(4,'3c09f9ba-eff7-43d3-b304-aad36d441d4f','article.tag',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{"tag":"tag1"}',1780003064000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(5,'f7341e55-6f24-4617-ac51-f488d7b09766','article.untag',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{"tag":"tag1"}',1780003065000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(6,'ce782ad7-40bb-4e47-baec-8877a7ac8e12','article.delete',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{}',1780003066000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(7,'959ea936-21e3-44e1-b89c-e2f787733923','article.restore',1,'e66b6857-e958-44e8-ab5d-f5ebe5009209','{}',1780003067000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(8,'ae662ee4-efae-4989-8afe-360a90af265a','highlight.create',1,'bc118443-f228-45dd-9e3f-af8df52a0809','{"article_id":"e66b6857-e958-44e8-ab5d-f5ebe5009209","color":"pink","note":"fixture text 99 ünïcode ✓","position":97,"quote":"fixture text 96 ünïcode ✓"}',1780003068000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(9,'23877294-44d1-4759-8009-77ed5251f1f2','highlight.update',1,'bc118443-f228-45dd-9e3f-af8df52a0809','{"color":"yellow","note":"fixture text 101 ünïcode ✓"}',1780003069000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(10,'6c4336a8-b1ae-4907-9d3a-3fa978422e43','highlight.delete',1,'bc118443-f228-45dd-9e3f-af8df52a0809','{}',1780003070000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(11,'58f44520-1598-4f9e-bcfa-c940528df6c8','highlight.restore',1,'bc118443-f228-45dd-9e3f-af8df52a0809','{}',1780003071000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(12,'fcddba69-e5b4-4ecd-96fd-e6946de972aa','note.create',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"article_id":"e66b6857-e958-44e8-ab5d-f5ebe5009209","body":"fixture text 103 ünïcode ✓"}',1780003072000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(13,'dfaca65e-2c9c-4ea8-9f66-8cce710daca9','note.update',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"body":"fixture text 104 ünïcode ✓"}',1780003073000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(14,'9fdfd898-c437-4df2-80e6-2c7a78bf6cb1','note.delete',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{}',1780003074000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(15,'722f54d5-9899-4ab9-83bf-1fafae38ab58','note.restore',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{}',1780003075000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(16,'6e109e69-acb2-4a72-92ae-ef5181e17d6c','collection.create',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{"name":"fixture text 105 ünïcode ✓","position":106.0}',1780003076000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(17,'e08677c3-4a6a-4e85-b228-f461b2169cd7','collection.update',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{"name":"fixture text 107 ünïcode ✓","position":108.0}',1780003077000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(18,'85576ffc-908a-4c6b-b9cd-6c9a851bcaf3','collection.add',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{"article_id":"e66b6857-e958-44e8-ab5d-f5ebe5009209"}',1780003078000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(19,'5185cdeb-961d-40f7-9163-509606577c93','collection.remove',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{"article_id":"e66b6857-e958-44e8-ab5d-f5ebe5009209"}',1780003079000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(20,'27430206-9275-4081-af6b-7ad82204a4a7','collection.delete',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{}',1780003080000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(21,'ee741f1e-5bee-44cc-9f74-97eaf618e232','collection.restore',1,'33208f9c-1a98-476a-9f5b-371fc0b848e6','{}',1780003081000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(22,'12546fe7-a53e-4736-a1a0-5efc0667e18e','episode.save',1,'94479758-1525-4faf-b4a8-e1ddea520dbe','{"audio_ref":"fixture text 113 ünïcode ✓","duration":114.0,"feed":"https://example.com/fixture/112","title":"fixture text 111 ünïcode ✓","transcript":"fixture text 115 ünïcode ✓"}',1780003082000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(23,'cffb0633-4260-48f7-b662-f3743ffb7bc9','episode.update',1,'94479758-1525-4faf-b4a8-e1ddea520dbe','{"audio_ref":"fixture text 118 ünïcode ✓","duration":119.0,"feed":"https://example.com/fixture/117","title":"fixture text 116 ünïcode ✓","transcript":"fixture text 120 ünïcode ✓"}',1780003083000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(24,'7a8143f4-3332-4073-88b7-01a8cca32a16','episode.position',1,'94479758-1525-4faf-b4a8-e1ddea520dbe','{"position":121.0}',1780003084000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(25,'302e01eb-ed9d-4fd2-87cd-e8a7334ee13d','episode.delete',1,'94479758-1525-4faf-b4a8-e1ddea520dbe','{}',1780003085000,51,0,NULL);
INSERT INTO chronicle_outbox VALUES(26,'80c20c4e-d7d2-4bc1-9612-ea33fee5e61c','episode.restore',1,'94479758-1525-4faf-b4a8-e1ddea520dbe','{}',1780003086000,51,0,NULL);
CREATE TABLE chronicle_shadowed (entity TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID;
INSERT INTO chronicle_shadowed VALUES('article','e66b6857-e958-44e8-ab5d-f5ebe5009209');
INSERT INTO chronicle_shadowed VALUES('collection','33208f9c-1a98-476a-9f5b-371fc0b848e6');
INSERT INTO chronicle_shadowed VALUES('episode','94479758-1525-4faf-b4a8-e1ddea520dbe');
INSERT INTO chronicle_shadowed VALUES('highlight','bc118443-f228-45dd-9e3f-af8df52a0809');
INSERT INTO chronicle_shadowed VALUES('note','02ff79ba-932d-47fc-9c7e-b600d2257c88');
CREATE TABLE chronicle_rejected (
  device_seq INTEGER PRIMARY KEY,
  op_id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  version INTEGER NOT NULL,
  entity_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  device_time INTEGER NOT NULL,
  base_seq INTEGER NOT NULL,
  code TEXT NOT NULL,
  message TEXT NOT NULL,
  verdict TEXT,
  rejected_at INTEGER NOT NULL,
  seen INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS "library" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "plan" TEXT
);
INSERT INTO library VALUES('3e7f0c9c-7022-48a2-9f91-11e4b22b3495',1780000060000,'premium');
CREATE TABLE IF NOT EXISTS "chronicle_shadow_library" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "plan" TEXT
);
CREATE TABLE IF NOT EXISTS "article" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "url" TEXT,
  "title" TEXT,
  "byline" TEXT,
  "text" TEXT,
  "word_count" INTEGER,
  "status" TEXT,
  "favorite" INTEGER,
  "progress" REAL,
  "progress__device" TEXT,
  "progress__time" INTEGER,
  "deleted_at" INTEGER
);
INSERT INTO article VALUES('b396d0da-8541-487a-bb41-e5cad3539a49',1780000120000,'https://example.com/fixture/2','fixture text 67 ünïcode ✓','fixture text 68 ünïcode ✓','fixture text 69 ünïcode ✓',70,'archived',1,0.70999999999999996447,'21cef29c-d862-4714-ae54-f2b0d7f83f2b',1780002220000,1780002400000);
INSERT INTO article VALUES('680a88c0-321c-41f1-8643-6f4c48406223',1780001800000,'https://example.com/fixture/44','fixture text 45 ünïcode ✓','fixture text 46 ünïcode ✓',NULL,NULL,'archived',1,0.0,'6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1780001800000,NULL);
INSERT INTO article VALUES('e66b6857-e958-44e8-ab5d-f5ebe5009209',1780003061000,'https://example.com/fixture/85','fixture text 90 ünïcode ✓','fixture text 91 ünïcode ✓',NULL,NULL,'saved',0,0.9399999999999999467,'16b7b92f-7010-44f1-9b4e-23b99c6e5100',1780003063000,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_article" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "url" TEXT,
  "title" TEXT,
  "byline" TEXT,
  "text" TEXT,
  "word_count" INTEGER,
  "status" TEXT,
  "favorite" INTEGER,
  "progress" REAL,
  "progress__device" TEXT,
  "progress__time" INTEGER,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "article_tags" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "chronicle_shadow_article_tags" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "highlight" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "quote" TEXT,
  "position" INTEGER,
  "color" TEXT,
  "note" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO highlight VALUES('36361ab6-2cde-4e08-8927-cfafec499c3d',1780000180000,'b396d0da-8541-487a-bb41-e5cad3539a49','fixture text 8 ünïcode ✓',9,'blue','fixture text 73 ünïcode ✓',1780002520000);
INSERT INTO highlight VALUES('3d34395a-7cad-4b80-a2e3-25983072b878',1780001860000,'680a88c0-321c-41f1-8643-6f4c48406223','fixture text 50 ünïcode ✓',51,'blue','fixture text 53 ünïcode ✓',NULL);
INSERT INTO highlight VALUES('bc118443-f228-45dd-9e3f-af8df52a0809',1780003068000,'e66b6857-e958-44e8-ab5d-f5ebe5009209','fixture text 96 ünïcode ✓',97,'yellow','fixture text 101 ünïcode ✓',NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_highlight" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "quote" TEXT,
  "position" INTEGER,
  "color" TEXT,
  "note" TEXT,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "note" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "body" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO note VALUES('786a1ed5-b539-45d6-986d-34bd88019409',1780000240000,'b396d0da-8541-487a-bb41-e5cad3539a49','fixture text 74 ünïcode ✓',1780002640000);
INSERT INTO note VALUES('2358aeec-57fc-4c11-bf3d-83c6485de489',1780001920000,'680a88c0-321c-41f1-8643-6f4c48406223','fixture text 55 ünïcode ✓',NULL);
INSERT INTO note VALUES('02ff79ba-932d-47fc-9c7e-b600d2257c88',1780003072000,'e66b6857-e958-44e8-ab5d-f5ebe5009209','fixture text 104 ünïcode ✓',NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_note" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "body" TEXT,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "collection" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "name" TEXT,
  "position" REAL,
  "deleted_at" INTEGER
);
INSERT INTO collection VALUES('0af9b436-ea6d-415d-b505-570ccb5c029e',1780000300000,'fixture text 75 ünïcode ✓',76.0,1780002880000);
INSERT INTO collection VALUES('494415ef-deb0-418e-bbd5-b07a1fe7c097',1780001980000,'fixture text 56 ünïcode ✓',57.0,NULL);
INSERT INTO collection VALUES('33208f9c-1a98-476a-9f5b-371fc0b848e6',1780003076000,'fixture text 107 ünïcode ✓',108.0,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_collection" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "name" TEXT,
  "position" REAL,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "collection_members" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "chronicle_shadow_collection_members" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "episode" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "title" TEXT,
  "feed" TEXT,
  "audio_ref" TEXT,
  "duration" REAL,
  "transcript" TEXT,
  "position" REAL,
  "position__device" TEXT,
  "position__time" INTEGER,
  "deleted_at" INTEGER
);
INSERT INTO episode VALUES('c8f48ba6-d008-41f7-bbae-9baf5ce47700',1780000360000,'fixture text 79 ünïcode ✓','https://example.com/fixture/80','fixture text 81 ünïcode ✓',82.0,'fixture text 83 ünïcode ✓',84.0,'21cef29c-d862-4714-ae54-f2b0d7f83f2b',1780003000000,1780003060000);
INSERT INTO episode VALUES('61fb8bab-2ed4-4e13-bbf3-3ff5fdd567e5',1780002040000,'fixture text 58 ünïcode ✓','https://example.com/fixture/59','fixture text 60 ünïcode ✓',61.0,'fixture text 62 ünïcode ✓',0.0,'6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1780002040000,NULL);
INSERT INTO episode VALUES('94479758-1525-4faf-b4a8-e1ddea520dbe',1780003082000,'fixture text 116 ünïcode ✓','https://example.com/fixture/117','fixture text 118 ünïcode ✓',119.0,'fixture text 120 ünïcode ✓',121.0,'16b7b92f-7010-44f1-9b4e-23b99c6e5100',1780003084000,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_episode" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "title" TEXT,
  "feed" TEXT,
  "audio_ref" TEXT,
  "duration" REAL,
  "transcript" TEXT,
  "position" REAL,
  "position__device" TEXT,
  "position__time" INTEGER,
  "deleted_at" INTEGER
);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','article_fts','article_fts',0,'CREATE VIRTUAL TABLE "article_fts" USING fts5("title", "byline", "url", content="article_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'article_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO article_fts_data VALUES(1,X'0208080a');
INSERT INTO article_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO article_fts_data VALUES(137438953473,X'0000010303303434020601020602013502020402013602060101040103636f6d020601020401076578616d706c650206010203010766697874757265020e020101020102050105687474707302060102020104746578740208030101030107756e69636f64650208050101050003313434020601020602013502020402013602060101040102636f020601020401026578020601020301026669020e02010102010205010268740206010202010274650208030101030102756e020805010105000432636f6d0206010204010365786102060102030103666978020e020101020102050103687474020601020201037465780208030101030103756e69020805010105040906080a0e120c0c0f0a060809090d090a0a0b0a0e0a0b');
INSERT INTO article_fts_data VALUES(274877906945,X'0000010303303835030601020602013603020402013703060101040103636f6d030601020401076578616d706c650306010203010766697874757265030e020101020102050105687474707303060102020104746578740308030101030107756e69636f64650308050101050003313835030601020602013603020402013703060101040102636f030601020401026578030601020301026669030e02010102010205010268740306010202010274650308030101030102756e030805010105000432636f6d0306010204010365786103060102030103666978030e020101020102050103687474030601020201037465780308030101030103756e69030805010105040906080a0e120c0c0f0a060809090d090a0a0b0a0e0a0b');
INSERT INTO article_fts_data VALUES(412316860417,X'00000119033038350307010206020136030102013703010102393003020402013103060101040103636f6d030701020401076578616d706c650307010203010766697874757265030f020101020102050105687474707303070102020104746578740309030101030107756e69636f646503090501010500033138350307010206020136030102013703010102393003020402013103060101040102636f030701020401026578030701020301026669030f02010102010205010268740307010202010274650309030101030102756e030905010105000432636f6d0307010204010365786103070102030103666978030f020101020102050103687474030701020201037465780309030101030103756e690309050101050409050507080a0e120c0c0f0a0505070809090d090a0a0b0a0e0a0b');
INSERT INTO article_fts_data VALUES(549755813889,X'000000af03303835030101023930030102013103010103636f6d030101076578616d706c650301010766697874757265030101056874747073030101047465787403010107756e69636f646503010003313835030101023930030102013103010102636f03010102657803010102666903010102687403010102746503010102756e0301000432636f6d0301010365786103010103666978030101036874740301010374657803010103756e69030104060605070b0b09080b0706050606060606060807070707');
INSERT INTO article_fts_data VALUES(687194767361,X'000001050330383503060102060102393003020402013103060101040103636f6d030601020401076578616d706c650306010203010766697874757265030e020101020102050105687474707303060102020104746578740308030101030107756e69636f6465030805010105000331383503060102060102393003020402013103060101040102636f030601020401026578030601020301026669030e02010102010205010268740306010202010274650308030101030102756e030805010105000432636f6d0306010204010365786103060102030103666978030e020101020102050103687474030601020201037465780308030101030103756e69030805010105040907080a0e120c0c0f0a070809090d090a0a0b0a0e0a0b');
CREATE TABLE IF NOT EXISTS 'article_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO article_fts_idx VALUES(1,X'',2);
INSERT INTO article_fts_idx VALUES(2,X'',2);
INSERT INTO article_fts_idx VALUES(3,X'',2);
INSERT INTO article_fts_idx VALUES(4,X'',2);
INSERT INTO article_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'article_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO article_fts_docsize VALUES(2,X'040405');
INSERT INTO article_fts_docsize VALUES(3,X'040405');
CREATE TABLE IF NOT EXISTS 'article_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO article_fts_config VALUES('rank','bm25(10.0, 2.0, 1.0)');
INSERT INTO article_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','article_text_fts','article_text_fts',0,'CREATE VIRTUAL TABLE "article_text_fts" USING fts5("text", content="article_text_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'article_text_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO article_text_fts_data VALUES(1,X'0200');
INSERT INTO article_text_fts_data VALUES(10,X'000000010104040004010101020101030101040101');
INSERT INTO article_text_fts_data VALUES(137438953473,X'00000062033032370102040107666978747572650102020104746578740102030107756e69636f6465010205000331323701020401026669010202010274650102030102756e01020500043266697801020201037465780102030103756e6901020504070c090c080707070908');
INSERT INTO article_text_fts_data VALUES(274877906945,X'00000062033032370103040107666978747572650103020104746578740103030107756e69636f6465010305000331323701030401026669010302010274650103030102756e01030500043266697801030201037465780103030103756e6901030504070c090c080707070908');
INSERT INTO article_text_fts_data VALUES(412316860417,X'0000006e033032370101010236390102040107666978747572650103020104746578740103030107756e69636f6465010305000331323701010102363901020401026669010302010274650103030102756e01030500043266697801030201037465780103030103756e690103050406070c090c07070707070908');
INSERT INTO article_text_fts_data VALUES(549755813889,X'00000057033036390101010766697874757265010101047465787401010107756e69636f64650101000331363901010102666901010102746501010102756e01010004326669780101010374657801010103756e69010104060b080b070606060807');
CREATE TABLE IF NOT EXISTS 'article_text_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO article_text_fts_idx VALUES(1,X'',2);
INSERT INTO article_text_fts_idx VALUES(2,X'',2);
INSERT INTO article_text_fts_idx VALUES(3,X'',2);
INSERT INTO article_text_fts_idx VALUES(4,X'',2);
CREATE TABLE IF NOT EXISTS 'article_text_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO article_text_fts_docsize VALUES(2,X'00');
INSERT INTO article_text_fts_docsize VALUES(3,X'00');
CREATE TABLE IF NOT EXISTS 'article_text_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO article_text_fts_config VALUES('rank','bm25(1.0)');
INSERT INTO article_text_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','article_tags_fts','article_tags_fts',0,'CREATE VIRTUAL TABLE "article_tags_fts" USING fts5("value", content="article_tags_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'article_tags_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO article_tags_fts_data VALUES(1,X'0000');
INSERT INTO article_tags_fts_data VALUES(10,X'000000010102020002010101020101');
INSERT INTO article_tags_fts_data VALUES(137438953473,X'0000001e0530746167310102020003317461010202000432746167010202040908');
INSERT INTO article_tags_fts_data VALUES(274877906945,X'0000001b0530746167310101000331746101010004327461670101040807');
CREATE TABLE IF NOT EXISTS 'article_tags_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO article_tags_fts_idx VALUES(1,X'',2);
INSERT INTO article_tags_fts_idx VALUES(2,X'',2);
CREATE TABLE IF NOT EXISTS 'article_tags_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
CREATE TABLE IF NOT EXISTS 'article_tags_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO article_tags_fts_config VALUES('rank','bm25(6.0)');
INSERT INTO article_tags_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','highlight_fts','highlight_fts',0,'CREATE VIRTUAL TABLE "highlight_fts" USING fts5("quote", "note", content="highlight_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'highlight_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO highlight_fts_data VALUES(1,X'020808');
INSERT INTO highlight_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO highlight_fts_data VALUES(137438953473,X'0000008d0330353002020402013302060101040107666978747572650208020101020104746578740208030101030107756e69636f64650208050101050003313530020204020133020601010401026669020802010102010274650208030101030102756e02080501010500043266697802080201010201037465780208030101030103756e690208050101050407080f0c0f08080a0a0a0c0b');
INSERT INTO highlight_fts_data VALUES(274877906945,X'0000008d0330393603020402013903060101040107666978747572650308020101020104746578740308030101030107756e69636f64650308050101050003313936030204020139030601010401026669030802010102010274650308030101030102756e03080501010500043266697803080201010201037465780308030101030103756e690308050101050407080f0c0f08080a0a0a0c0b');
INSERT INTO highlight_fts_data VALUES(412316860417,X'000000a4043031303103060101040102393603030402013903010107666978747572650309020101020104746578740309030101030107756e69636f64650309050101050003313130030601010401023936030304020139030101026669030902010102010274650309030101030102756e0309050101050004323130310306010104010366697803090201010201037465780309030101030103756e69030905010105040a07050f0c0f0a07050a0a0a0b0b0b');
INSERT INTO highlight_fts_data VALUES(549755813889,X'0000006b04303130310301010239360301010766697874757265030101047465787403010107756e69636f64650301000331313003010102393603010102666903010102746503010102756e0301000432313031030101036669780301010374657803010103756e6903010407060b080b0706060606080707');
INSERT INTO highlight_fts_data VALUES(687194767361,X'0000009a04303130310306010104010239360302040107666978747572650308020101020104746578740308030101030107756e69636f6465030805010105000331313003060101040102393603020401026669030802010102010274650308030101030102756e0308050101050004323130310306010104010366697803080201010201037465780308030101030103756e69030805010105040a070f0c0f0a070a0a0a0b0b0b');
CREATE TABLE IF NOT EXISTS 'highlight_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO highlight_fts_idx VALUES(1,X'',2);
INSERT INTO highlight_fts_idx VALUES(2,X'',2);
INSERT INTO highlight_fts_idx VALUES(3,X'',2);
INSERT INTO highlight_fts_idx VALUES(4,X'',2);
INSERT INTO highlight_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'highlight_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO highlight_fts_docsize VALUES(2,X'0404');
INSERT INTO highlight_fts_docsize VALUES(3,X'0404');
CREATE TABLE IF NOT EXISTS 'highlight_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO highlight_fts_config VALUES('rank','bm25(4.0, 4.0)');
INSERT INTO highlight_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','note_fts','note_fts',0,'CREATE VIRTUAL TABLE "note_fts" USING fts5("body", content="note_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'note_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO note_fts_data VALUES(1,X'0208');
INSERT INTO note_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO note_fts_data VALUES(137438953473,X'00000062033035350202040107666978747572650202020104746578740202030107756e69636f6465020205000331353502020401026669020202010274650202030102756e02020500043266697802020201037465780202030103756e6902020504070c090c080707070908');
INSERT INTO note_fts_data VALUES(274877906945,X'0000006b04303130330302040107666978747572650302020104746578740302030107756e69636f6465030205000331313003020401026669030202010274650302030102756e030205000432313033030204010366697803020201037465780302030103756e6903020504080c090c08070707090808');
INSERT INTO note_fts_data VALUES(412316860417,X'00000075043031303303010301340302040107666978747572650303020104746578740303030107756e69636f6465030305000331313003030401026669030302010274650303030102756e0303050004323130330301030134030204010366697803030201037465780303030103756e690303050407060c090c0807070708060808');
INSERT INTO note_fts_data VALUES(549755813889,X'0000005f04303130340301010766697874757265030101047465787403010107756e69636f64650301000331313003010102666903010102746503010102756e0301000432313034030101036669780301010374657803010103756e69030104070b080b07060606080707');
INSERT INTO note_fts_data VALUES(687194767361,X'0000006b04303130340302040107666978747572650302020104746578740302030107756e69636f6465030205000331313003020401026669030202010274650302030102756e030205000432313034030204010366697803020201037465780302030103756e6903020504080c090c08070707090808');
CREATE TABLE IF NOT EXISTS 'note_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO note_fts_idx VALUES(1,X'',2);
INSERT INTO note_fts_idx VALUES(2,X'',2);
INSERT INTO note_fts_idx VALUES(3,X'',2);
INSERT INTO note_fts_idx VALUES(4,X'',2);
INSERT INTO note_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'note_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO note_fts_docsize VALUES(2,X'04');
INSERT INTO note_fts_docsize VALUES(3,X'04');
CREATE TABLE IF NOT EXISTS 'note_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO note_fts_config VALUES('rank','bm25(4.0)');
INSERT INTO note_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','episode_fts','episode_fts',0,'CREATE VIRTUAL TABLE "episode_fts" USING fts5("title", "transcript", content="episode_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'episode_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO episode_fts_data VALUES(1,X'020808');
INSERT INTO episode_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO episode_fts_data VALUES(137438953473,X'0000008f033035380202040102363202060101040107666978747572650208020101020104746578740208030101030107756e69636f6465020805010105000331353802020401023632020601010401026669020802010102010274650208030101030102756e02080501010500043266697802080201010201037465780208030101030103756e690208050101050407090f0c0f08090a0a0a0c0b');
INSERT INTO episode_fts_data VALUES(274877906945,X'00000099043031313103020403013503060101040107666978747572650308020101020104746578740308030101030107756e69636f6465030805010105000331313103080401010401026669030802010102010274650308030101030102756e0308050101050004323131310302040301350306010104010366697803080201010201037465780308030101030103756e690308050101050408080f0c0f0b0a0a0a09080b0b');
INSERT INTO episode_fts_data VALUES(412316860417,X'000000b40430313131030103013503010301360302040202323003060101040107666978747572650309020101020104746578740309030101030107756e69636f64650309050101050003313131030304020132030601010401026669030902010102010274650309030101030102756e03090501010500043231313103010301350301030136030204020232300306010104010366697803090201010201037465780309030101030103756e6903090501010504070506090f0c0f08080a0a0a080506090b0b');
INSERT INTO episode_fts_data VALUES(549755813889,X'0000007004303131360301020232300301010766697874757265030101047465787403010107756e69636f646503010003313131030102013203010102666903010102746503010102756e0301000432313136030102023230030101036669780301010374657803010103756e6903010407060b080b070506060608060707');
INSERT INTO episode_fts_data VALUES(687194767361,X'000000a004303131360302040202323003060101040107666978747572650308020101020104746578740308030101030107756e69636f64650308050101050003313131030204020132030601010401026669030802010102010274650308030101030102756e030805010105000432313136030204020232300306010104010366697803080201010201037465780308030101030103756e690308050101050408090f0c0f08080a0a0a09090b0b');
CREATE TABLE IF NOT EXISTS 'episode_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO episode_fts_idx VALUES(1,X'',2);
INSERT INTO episode_fts_idx VALUES(2,X'',2);
INSERT INTO episode_fts_idx VALUES(3,X'',2);
INSERT INTO episode_fts_idx VALUES(4,X'',2);
INSERT INTO episode_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'episode_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO episode_fts_docsize VALUES(2,X'0404');
INSERT INTO episode_fts_docsize VALUES(3,X'0404');
CREATE TABLE IF NOT EXISTS 'episode_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO episode_fts_config VALUES('rank','bm25(10.0, 1.0)');
INSERT INTO episode_fts_config VALUES('version',4);
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
CREATE TRIGGER chronicle_outbox_fixed BEFORE UPDATE OF op_id, device_seq, type, version, entity_id, payload, device_time, base_seq ON chronicle_outbox BEGIN SELECT RAISE(ABORT, 'chronicle_outbox: queued ops are immutable'); END;
CREATE TRIGGER chronicle_rejected_from_outbox BEFORE INSERT ON chronicle_rejected
WHEN NOT EXISTS (SELECT 1 FROM chronicle_outbox WHERE op_id = NEW.op_id AND device_seq = NEW.device_seq) BEGIN
  SELECT RAISE(ABORT, 'chronicle_rejected: only a queued op can be rejected');
END;
CREATE TRIGGER chronicle_rejected_fixed BEFORE UPDATE OF device_seq, op_id, type, version, entity_id, payload, device_time, base_seq, code, message, rejected_at ON chronicle_rejected BEGIN SELECT RAISE(ABORT, 'chronicle_rejected: a rejection is kept as it was recorded'); END;
CREATE TRIGGER chronicle_rejected_kept BEFORE DELETE ON chronicle_rejected BEGIN SELECT RAISE(ABORT, 'chronicle_rejected: rejected ops are kept'); END;
CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id)
 AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id) BEGIN
  SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
END;
CREATE INDEX "article_tags_by_value" ON "article_tags"(value);
CREATE INDEX "highlight_by_article_id" ON "highlight"("article_id");
CREATE INDEX "note_by_article_id" ON "note"("article_id");
CREATE INDEX "collection_members_by_value" ON "collection_members"(value);
CREATE VIEW "article_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."byline" AS "byline", t."url" AS "url" FROM "article" t WHERE t.deleted_at IS NULL;
CREATE VIEW "article_text_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."text" AS "text" FROM "article" t WHERE t.deleted_at IS NULL AND EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium');
CREATE TRIGGER "article_text_fts_plan_on" AFTER UPDATE OF "plan" ON "library" WHEN new."plan" = 'premium' AND old."plan" IS NOT 'premium' BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); INSERT INTO "article_text_fts"(rowid, "text") SELECT rid, "text" FROM "article_text_fts_content"; END;
CREATE TRIGGER "article_text_fts_plan_new" AFTER INSERT ON "library" WHEN new."plan" = 'premium' AND (SELECT count(*) FROM "library" WHERE "plan" = 'premium') = 1 BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); INSERT INTO "article_text_fts"(rowid, "text") SELECT rid, "text" FROM "article_text_fts_content"; END;
CREATE TRIGGER "article_text_fts_plan_off" AFTER UPDATE OF "plan" ON "library" WHEN old."plan" = 'premium' AND new."plan" IS NOT 'premium' AND NOT EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium') BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); END;
CREATE TRIGGER "article_text_fts_plan_gone" AFTER DELETE ON "library" WHEN old."plan" = 'premium' AND NOT EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium') BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); END;
CREATE VIEW "article_tags_fts_content" AS SELECT s.rowid AS rid, s.id AS id, s.id AS owner_id, s.value AS value FROM "article_tags" s JOIN "article" t ON t.id = s.id WHERE t.deleted_at IS NULL;
CREATE VIEW "highlight_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t."article_id" AS owner_id, t."quote" AS "quote", t."note" AS "note" FROM "highlight" t JOIN "article" o ON o.id = t."article_id" WHERE t.deleted_at IS NULL AND o.deleted_at IS NULL;
CREATE VIEW "note_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t."article_id" AS owner_id, t."body" AS "body" FROM "note" t JOIN "article" o ON o.id = t."article_id" WHERE t.deleted_at IS NULL AND o.deleted_at IS NULL;
CREATE VIEW "episode_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."transcript" AS "transcript" FROM "episode" t WHERE t.deleted_at IS NULL;
PRAGMA writable_schema=OFF;
COMMIT;
