PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
INSERT INTO chronicle_meta VALUES('acked_device_seq',0);
INSERT INTO chronicle_meta VALUES('created_at',1780000000000);
INSERT INTO chronicle_meta VALUES('cursor',62);
INSERT INTO chronicle_meta VALUES('device_id','16b7b92f-7010-44f1-9b4e-23b99c6e5100');
INSERT INTO chronicle_meta VALUES('format_version',4);
INSERT INTO chronicle_meta VALUES('last_device_seq',32);
INSERT INTO chronicle_meta VALUES('library_id','3e7f0c9c-7022-48a2-9f91-11e4b22b3495');
INSERT INTO chronicle_meta VALUES('schema_fingerprint','4ca93bea7cbcda6401a59f9447efaca8cf97ae9f05334d279fea58f33755cd27');
INSERT INTO chronicle_meta VALUES('schema_name','readitlater');
INSERT INTO chronicle_meta VALUES('schema_version',3);
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
INSERT INTO chronicle_log VALUES(2,'e1b172d4-2cd1-4cf8-81f4-33b8a8a1dc77','21cef29c-d862-4714-ae54-f2b0d7f83f2b',1,'article.save',2,'b396d0da-8541-487a-bb41-e5cad3539a49','{"author":"fixture text 4 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 3 ünïcode ✓","url":"https://example.com/fixture/2"}',1780000120000,1,1780000120000);
INSERT INTO chronicle_log VALUES(3,'d0039723-8f95-4af5-85e0-426c4f64b325','21cef29c-d862-4714-ae54-f2b0d7f83f2b',2,'highlight.create',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49","color":"yellow","note":"fixture text 11 ünïcode ✓","position":9,"quote":"fixture text 8 ünïcode ✓"}',1780000180000,2,1780000180000);
INSERT INTO chronicle_log VALUES(4,'03021c83-1ce9-4172-9649-7d8042054d61','21cef29c-d862-4714-ae54-f2b0d7f83f2b',3,'note.create',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49","body":"fixture text 13 ünïcode ✓"}',1780000240000,3,1780000240000);
INSERT INTO chronicle_log VALUES(5,'f68b00d1-5ca7-44a8-bce8-c8dc1fe1f3ad','21cef29c-d862-4714-ae54-f2b0d7f83f2b',4,'collection.create',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 14 ünïcode ✓","position":15.0}',1780000300000,4,1780000300000);
INSERT INTO chronicle_log VALUES(6,'7ece7bde-bf51-4bdf-b71d-d6cab367b98e','21cef29c-d862-4714-ae54-f2b0d7f83f2b',5,'episode.save',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 18 ünïcode ✓","duration":19.0,"feed":"https://example.com/fixture/17","title":"fixture text 16 ünïcode ✓","transcript":"fixture text 20 ünïcode ✓"}',1780000360000,5,1780000360000);
INSERT INTO chronicle_log VALUES(7,'645e8a57-f267-4370-917f-b64c8d14a50c','21cef29c-d862-4714-ae54-f2b0d7f83f2b',6,'feed.subscribe',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{"title":"fixture text 22 ünïcode ✓","url":"https://example.com/fixture/21"}',1780000420000,6,1780000420000);
INSERT INTO chronicle_log VALUES(8,'d203cf7f-0abe-4d0c-97d9-3e8469c01e2f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1,'article.update',2,'b396d0da-8541-487a-bb41-e5cad3539a49','{"author":"fixture text 24 ünïcode ✓","favorite":true,"status":"archived","title":"fixture text 23 ünïcode ✓"}',1780000480000,7,1780000480000);
INSERT INTO chronicle_log VALUES(9,'9749b8cf-0044-46b0-9b54-79a995e3d37a','00000000-0000-0000-0000-000000000000',2,'article.parsed',2,'b396d0da-8541-487a-bb41-e5cad3539a49','{"author":"fixture text 28 ünïcode ✓","text":"fixture text 29 ünïcode ✓","title":"fixture text 27 ünïcode ✓","word_count":30}',1780000540000,8,1780000540000);
INSERT INTO chronicle_log VALUES(10,'a3324d33-d998-4685-b93a-f35c8e260008','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',2,'article.progress',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"progress":0.31}',1780000600000,9,1780000600000);
INSERT INTO chronicle_log VALUES(11,'5a0d9697-e090-427e-a790-ff392b4743e1','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',3,'article.tag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag1"}',1780000660000,10,1780000660000);
INSERT INTO chronicle_log VALUES(12,'8d61ae05-2cf2-45c2-8edc-8948eec3440a','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',4,'article.untag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag1"}',1780000720000,11,1780000720000);
INSERT INTO chronicle_log VALUES(13,'d5a3f188-8693-454d-8d90-37b362275e04','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',5,'article.delete',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780000780000,12,1780000780000);
INSERT INTO chronicle_log VALUES(14,'31f599c9-6797-42a6-af79-141c6dbdc243','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',6,'highlight.update',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"color":"blue","note":"fixture text 33 ünïcode ✓"}',1780000840000,13,1780000840000);
INSERT INTO chronicle_log VALUES(15,'63265e99-bf85-4e49-8c63-0867e2bbd220','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',7,'highlight.delete',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780000900000,14,1780000900000);
INSERT INTO chronicle_log VALUES(16,'1ce54ec9-7c09-4362-a82c-b582871abb2e','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',8,'note.update',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"body":"fixture text 34 ünïcode ✓"}',1780000960000,15,1780000960000);
INSERT INTO chronicle_log VALUES(17,'d226212a-15a4-4b6f-b441-5cb41301441f','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',9,'note.delete',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780001020000,16,1780001020000);
INSERT INTO chronicle_log VALUES(18,'9159c1d9-a6ca-4e47-a009-5be2ab79d7af','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',10,'collection.update',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 35 ünïcode ✓","position":36.0}',1780001080000,17,1780001080000);
INSERT INTO chronicle_log VALUES(19,'1b12205a-dfff-4432-b0cb-151f57ea2b95','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',11,'collection.add_article',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49"}',1780001140000,18,1780001140000);
INSERT INTO chronicle_log VALUES(20,'348e2ea3-309e-4ea6-894a-8ae8e44be0f3','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',12,'collection.add_episode',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"episode_id":"c8f48ba6-d008-41f7-bbae-9baf5ce47700"}',1780001200000,19,1780001200000);
INSERT INTO chronicle_log VALUES(21,'641a79a5-4c83-427b-a94a-ce05f1b1f28b','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',13,'collection.remove_article',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"b396d0da-8541-487a-bb41-e5cad3539a49"}',1780001260000,20,1780001260000);
INSERT INTO chronicle_log VALUES(22,'3897125c-e4d6-4984-b24b-38bdb3b62b94','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',14,'collection.remove_episode',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"episode_id":"c8f48ba6-d008-41f7-bbae-9baf5ce47700"}',1780001320000,21,1780001320000);
INSERT INTO chronicle_log VALUES(23,'5ec073b8-896d-4004-9bbd-ef2e474e7720','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',15,'collection.delete',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780001380000,22,1780001380000);
INSERT INTO chronicle_log VALUES(24,'e949c2a3-2f74-4cd2-ae09-0322f2f688a4','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',16,'episode.update',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 43 ünïcode ✓","duration":44.0,"feed":"https://example.com/fixture/42","title":"fixture text 41 ünïcode ✓","transcript":"fixture text 45 ünïcode ✓"}',1780001440000,23,1780001440000);
INSERT INTO chronicle_log VALUES(25,'cdda1e61-60c1-45cb-ad17-92b3513dd7c2','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',17,'episode.position',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"position":46.0}',1780001500000,24,1780001500000);
INSERT INTO chronicle_log VALUES(26,'b5b6d0c8-5528-44db-9d44-b8c481752f9c','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',18,'episode.delete',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780001560000,25,1780001560000);
INSERT INTO chronicle_log VALUES(27,'f082c6d7-e0ca-46d0-bb43-3967d7fb0d6c','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',19,'feed.rename',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{"title":"fixture text 47 ünïcode ✓"}',1780001620000,26,1780001620000);
INSERT INTO chronicle_log VALUES(28,'75d1d675-2042-49d2-843a-2a0611b81c74','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',20,'feed.unsubscribe',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{}',1780001680000,27,1780001680000);
INSERT INTO chronicle_log VALUES(29,'680a88c0-321c-41f1-8643-6f4c48406223','21cef29c-d862-4714-ae54-f2b0d7f83f2b',7,'article.restore',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780001740000,28,1780001740000);
INSERT INTO chronicle_log VALUES(30,'f10f1713-a9fd-4c63-afc8-171a976bb4de','21cef29c-d862-4714-ae54-f2b0d7f83f2b',8,'highlight.restore',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780001800000,29,1780001800000);
INSERT INTO chronicle_log VALUES(31,'3d34395a-7cad-4b80-a2e3-25983072b878','21cef29c-d862-4714-ae54-f2b0d7f83f2b',9,'note.restore',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780001860000,30,1780001860000);
INSERT INTO chronicle_log VALUES(32,'927ceedd-6b95-460f-864f-ae52b2c237ff','21cef29c-d862-4714-ae54-f2b0d7f83f2b',10,'collection.restore',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780001920000,31,1780001920000);
INSERT INTO chronicle_log VALUES(33,'2358aeec-57fc-4c11-bf3d-83c6485de489','21cef29c-d862-4714-ae54-f2b0d7f83f2b',11,'episode.restore',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780001980000,32,1780001980000);
INSERT INTO chronicle_log VALUES(34,'a650fcc6-01fb-49f2-9f95-2cf10593fa01','21cef29c-d862-4714-ae54-f2b0d7f83f2b',12,'feed.resubscribe',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{}',1780002040000,33,1780002040000);
INSERT INTO chronicle_log VALUES(35,'494415ef-deb0-418e-bbd5-b07a1fe7c097','00000000-0000-0000-0000-000000000000',3,'library.plan',1,'3e7f0c9c-7022-48a2-9f91-11e4b22b3495','{"plan":"free"}',1780002100000,34,1780002100000);
INSERT INTO chronicle_log VALUES(36,'61fb8bab-2ed4-4e13-bbf3-3ff5fdd567e5','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',21,'article.save',2,'ec5bed08-2029-49ca-b03a-874a1ba266ee','{"author":"fixture text 51 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 50 ünïcode ✓","url":"https://example.com/fixture/49"}',1780002160000,35,1780002160000);
INSERT INTO chronicle_log VALUES(37,'0f8f831d-f8bf-40f0-9ffa-88260292f8c1','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',22,'highlight.create',1,'d274d2a9-75a8-4fe4-973c-7162c511b48e','{"article_id":"ec5bed08-2029-49ca-b03a-874a1ba266ee","color":"blue","note":"fixture text 58 ünïcode ✓","position":56,"quote":"fixture text 55 ünïcode ✓"}',1780002220000,36,1780002220000);
INSERT INTO chronicle_log VALUES(38,'06e65eda-ce55-49bf-bcbd-2229e0e74090','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',23,'note.create',1,'659f3c08-b78a-4a06-a7e5-e66e8d0c8e07','{"article_id":"ec5bed08-2029-49ca-b03a-874a1ba266ee","body":"fixture text 60 ünïcode ✓"}',1780002280000,37,1780002280000);
INSERT INTO chronicle_log VALUES(39,'57b54c71-da9a-4b51-bec8-d06ac916711a','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',24,'collection.create',1,'2f183225-4391-4908-a843-e13d3c966a72','{"name":"fixture text 61 ünïcode ✓","position":62.0}',1780002340000,38,1780002340000);
INSERT INTO chronicle_log VALUES(40,'5d9eb5f4-8229-46ff-be7e-614619eeb3bf','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',25,'episode.save',1,'db25bd78-bf9d-4376-a370-a3c5ebc77372','{"audio_ref":"fixture text 65 ünïcode ✓","duration":66.0,"feed":"https://example.com/fixture/64","title":"fixture text 63 ünïcode ✓","transcript":"fixture text 67 ünïcode ✓"}',1780002400000,39,1780002400000);
INSERT INTO chronicle_log VALUES(41,'64848b10-11da-4696-a42b-f97e1e25a824','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',26,'feed.subscribe',1,'26505b5b-239f-4544-bc66-e3f7bea14830','{"title":"fixture text 69 ünïcode ✓","url":"https://example.com/fixture/68"}',1780002460000,40,1780002460000);
INSERT INTO chronicle_log VALUES(42,'b7a444ad-4f76-43fe-8524-749f8c3b3121','21cef29c-d862-4714-ae54-f2b0d7f83f2b',13,'article.update',2,'b396d0da-8541-487a-bb41-e5cad3539a49','{"author":"fixture text 71 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 70 ünïcode ✓"}',1780002520000,41,1780002520000);
INSERT INTO chronicle_log VALUES(43,'76e1d70d-56c0-443c-9aa6-cecb33337e92','00000000-0000-0000-0000-000000000000',4,'article.parsed',2,'b396d0da-8541-487a-bb41-e5cad3539a49','{"author":"fixture text 75 ünïcode ✓","text":"fixture text 76 ünïcode ✓","title":"fixture text 74 ünïcode ✓","word_count":77}',1780002580000,42,1780002580000);
INSERT INTO chronicle_log VALUES(44,'71fbc1a8-4009-4d09-a897-d67c0111663a','21cef29c-d862-4714-ae54-f2b0d7f83f2b',14,'article.progress',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"progress":0.78}',1780002640000,43,1780002640000);
INSERT INTO chronicle_log VALUES(45,'7b7f4ed6-548c-4f39-a29a-372140367eea','21cef29c-d862-4714-ae54-f2b0d7f83f2b',15,'article.tag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag0"}',1780002700000,44,1780002700000);
INSERT INTO chronicle_log VALUES(46,'5d809f93-b74c-4e3d-8ec7-1ad29d63ba14','21cef29c-d862-4714-ae54-f2b0d7f83f2b',16,'article.untag',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{"tag":"tag0"}',1780002760000,45,1780002760000);
INSERT INTO chronicle_log VALUES(47,'e0257c46-dbd7-4c3c-ba0f-9bd5bd5e3220','21cef29c-d862-4714-ae54-f2b0d7f83f2b',17,'article.delete',1,'b396d0da-8541-487a-bb41-e5cad3539a49','{}',1780002820000,46,1780002820000);
INSERT INTO chronicle_log VALUES(48,'63fbba35-3ed2-4976-8fe9-fecec2f1db50','21cef29c-d862-4714-ae54-f2b0d7f83f2b',18,'highlight.update',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{"color":"purple","note":"fixture text 80 ünïcode ✓"}',1780002880000,47,1780002880000);
INSERT INTO chronicle_log VALUES(49,'0f6ab3db-9f3e-422b-9f39-b19e3ed0099b','21cef29c-d862-4714-ae54-f2b0d7f83f2b',19,'highlight.delete',1,'36361ab6-2cde-4e08-8927-cfafec499c3d','{}',1780002940000,48,1780002940000);
INSERT INTO chronicle_log VALUES(50,'e66b6857-e958-44e8-ab5d-f5ebe5009209','21cef29c-d862-4714-ae54-f2b0d7f83f2b',20,'note.update',1,'786a1ed5-b539-45d6-986d-34bd88019409','{"body":"fixture text 81 ünïcode ✓"}',1780003000000,49,1780003000000);
INSERT INTO chronicle_log VALUES(51,'bf958ad6-c75a-45c9-9a6b-0fa9633b4df2','21cef29c-d862-4714-ae54-f2b0d7f83f2b',21,'note.delete',1,'786a1ed5-b539-45d6-986d-34bd88019409','{}',1780003060000,50,1780003060000);
INSERT INTO chronicle_log VALUES(52,'2d705a4f-7c48-454b-b9d5-a26adfe51081','21cef29c-d862-4714-ae54-f2b0d7f83f2b',22,'collection.update',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"name":"fixture text 82 ünïcode ✓","position":83.0}',1780003120000,51,1780003120000);
INSERT INTO chronicle_log VALUES(53,'74795931-67b6-49a8-b530-2b69d16a49a9','21cef29c-d862-4714-ae54-f2b0d7f83f2b',23,'collection.add_article',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"ec5bed08-2029-49ca-b03a-874a1ba266ee"}',1780003180000,52,1780003180000);
INSERT INTO chronicle_log VALUES(54,'3c09f9ba-eff7-43d3-b304-aad36d441d4f','21cef29c-d862-4714-ae54-f2b0d7f83f2b',24,'collection.add_episode',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"episode_id":"db25bd78-bf9d-4376-a370-a3c5ebc77372"}',1780003240000,53,1780003240000);
INSERT INTO chronicle_log VALUES(55,'f7341e55-6f24-4617-ac51-f488d7b09766','21cef29c-d862-4714-ae54-f2b0d7f83f2b',25,'collection.remove_article',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"article_id":"ec5bed08-2029-49ca-b03a-874a1ba266ee"}',1780003300000,54,1780003300000);
INSERT INTO chronicle_log VALUES(56,'ce782ad7-40bb-4e47-baec-8877a7ac8e12','21cef29c-d862-4714-ae54-f2b0d7f83f2b',26,'collection.remove_episode',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{"episode_id":"db25bd78-bf9d-4376-a370-a3c5ebc77372"}',1780003360000,55,1780003360000);
INSERT INTO chronicle_log VALUES(57,'959ea936-21e3-44e1-b89c-e2f787733923','21cef29c-d862-4714-ae54-f2b0d7f83f2b',27,'collection.delete',1,'0af9b436-ea6d-415d-b505-570ccb5c029e','{}',1780003420000,56,1780003420000);
INSERT INTO chronicle_log VALUES(58,'bc118443-f228-45dd-9e3f-af8df52a0809','21cef29c-d862-4714-ae54-f2b0d7f83f2b',28,'episode.update',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"audio_ref":"fixture text 90 ünïcode ✓","duration":91.0,"feed":"https://example.com/fixture/89","title":"fixture text 88 ünïcode ✓","transcript":"fixture text 92 ünïcode ✓"}',1780003480000,57,1780003480000);
INSERT INTO chronicle_log VALUES(59,'ae662ee4-efae-4989-8afe-360a90af265a','21cef29c-d862-4714-ae54-f2b0d7f83f2b',29,'episode.position',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{"position":93.0}',1780003540000,58,1780003540000);
INSERT INTO chronicle_log VALUES(60,'23877294-44d1-4759-8009-77ed5251f1f2','21cef29c-d862-4714-ae54-f2b0d7f83f2b',30,'episode.delete',1,'c8f48ba6-d008-41f7-bbae-9baf5ce47700','{}',1780003600000,59,1780003600000);
INSERT INTO chronicle_log VALUES(61,'6c4336a8-b1ae-4907-9d3a-3fa978422e43','21cef29c-d862-4714-ae54-f2b0d7f83f2b',31,'feed.rename',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{"title":"fixture text 94 ünïcode ✓"}',1780003660000,60,1780003660000);
INSERT INTO chronicle_log VALUES(62,'58f44520-1598-4f9e-bcfa-c940528df6c8','21cef29c-d862-4714-ae54-f2b0d7f83f2b',32,'feed.unsubscribe',1,'743f1b37-b7f2-4ef2-b8d0-db8f2e906d14','{}',1780003720000,61,1780003720000);
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
INSERT INTO chronicle_outbox VALUES(1,'fcddba69-e5b4-4ecd-96fd-e6946de972aa','article.save',2,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"author":"fixture text 97 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 96 ünïcode ✓","url":"https://example.com/fixture/95"}',1780003721000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(2,'dfaca65e-2c9c-4ea8-9f66-8cce710daca9','article.update',2,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"author":"fixture text 101 ünïcode ✓","favorite":false,"status":"saved","title":"fixture text 100 ünïcode ✓"}',1780003722000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(3,'9fdfd898-c437-4df2-80e6-2c7a78bf6cb1','article.progress',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"progress":0.04}',1780003723000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(4,'722f54d5-9899-4ab9-83bf-1fafae38ab58','article.tag',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"tag":"tag2"}',1780003724000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(5,'33208f9c-1a98-476a-9f5b-371fc0b848e6','article.untag',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{"tag":"tag2"}',1780003725000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(6,'6e109e69-acb2-4a72-92ae-ef5181e17d6c','article.delete',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{}',1780003726000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(7,'e08677c3-4a6a-4e85-b228-f461b2169cd7','article.restore',1,'02ff79ba-932d-47fc-9c7e-b600d2257c88','{}',1780003727000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(8,'5185cdeb-961d-40f7-9163-509606577c93','highlight.create',1,'85576ffc-908a-4c6b-b9cd-6c9a851bcaf3','{"article_id":"02ff79ba-932d-47fc-9c7e-b600d2257c88","color":"pink","note":"fixture text 109 ünïcode ✓","position":107,"quote":"fixture text 106 ünïcode ✓"}',1780003728000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(9,'27430206-9275-4081-af6b-7ad82204a4a7','highlight.update',1,'85576ffc-908a-4c6b-b9cd-6c9a851bcaf3','{"color":"yellow","note":"fixture text 111 ünïcode ✓"}',1780003729000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(10,'ee741f1e-5bee-44cc-9f74-97eaf618e232','highlight.delete',1,'85576ffc-908a-4c6b-b9cd-6c9a851bcaf3','{}',1780003730000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(11,'94479758-1525-4faf-b4a8-e1ddea520dbe','highlight.restore',1,'85576ffc-908a-4c6b-b9cd-6c9a851bcaf3','{}',1780003731000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(12,'cffb0633-4260-48f7-b662-f3743ffb7bc9','note.create',1,'12546fe7-a53e-4736-a1a0-5efc0667e18e','{"article_id":"02ff79ba-932d-47fc-9c7e-b600d2257c88","body":"fixture text 113 ünïcode ✓"}',1780003732000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(13,'7a8143f4-3332-4073-88b7-01a8cca32a16','note.update',1,'12546fe7-a53e-4736-a1a0-5efc0667e18e','{"body":"fixture text 114 ünïcode ✓"}',1780003733000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(14,'302e01eb-ed9d-4fd2-87cd-e8a7334ee13d','note.delete',1,'12546fe7-a53e-4736-a1a0-5efc0667e18e','{}',1780003734000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(15,'80c20c4e-d7d2-4bc1-9612-ea33fee5e61c','note.restore',1,'12546fe7-a53e-4736-a1a0-5efc0667e18e','{}',1780003735000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(16,'b7d84dd4-b866-460b-96db-e74866618e03','collection.create',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"name":"fixture text 115 ünïcode ✓","position":116.0}',1780003736000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(17,'44d2a99b-b347-42f7-9b62-95b7011d8a5c','collection.update',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"name":"fixture text 117 ünïcode ✓","position":118.0}',1780003737000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(18,'99f636cd-fbf8-4532-87e3-2187bf8db410','collection.add_article',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"article_id":"02ff79ba-932d-47fc-9c7e-b600d2257c88"}',1780003738000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(19,'843b5e6d-4016-4128-928d-fb1c71814176','collection.add_episode',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"episode_id":"db25bd78-bf9d-4376-a370-a3c5ebc77372"}',1780003739000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(20,'6c1f66a9-d202-44cd-b746-ad32f43982ce','collection.remove_article',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"article_id":"02ff79ba-932d-47fc-9c7e-b600d2257c88"}',1780003740000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(21,'be74b45f-2de0-4362-b86f-b088eb87d772','collection.remove_episode',1,'36feccee-0840-4b50-a2da-d025e4e33326','{"episode_id":"db25bd78-bf9d-4376-a370-a3c5ebc77372"}',1780003741000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(22,'2adcdb22-0f43-4bd1-9e1a-d59cce677602','collection.delete',1,'36feccee-0840-4b50-a2da-d025e4e33326','{}',1780003742000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(23,'03ad07b1-db17-49bb-b4c2-67e7ff6c1de9','collection.restore',1,'36feccee-0840-4b50-a2da-d025e4e33326','{}',1780003743000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(24,'2d4cff9d-a4bc-405d-8126-38d8ddc2a78d','episode.save',1,'23dfb60f-a29c-4cf0-9abd-3f04d551818f','{"audio_ref":"fixture text 125 ünïcode ✓","duration":126.0,"feed":"https://example.com/fixture/124","title":"fixture text 123 ünïcode ✓","transcript":"fixture text 127 ünïcode ✓"}',1780003744000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(25,'b06065ae-8fc7-495f-8540-4efb7d1e1091','episode.update',1,'23dfb60f-a29c-4cf0-9abd-3f04d551818f','{"audio_ref":"fixture text 130 ünïcode ✓","duration":131.0,"feed":"https://example.com/fixture/129","title":"fixture text 128 ünïcode ✓","transcript":"fixture text 132 ünïcode ✓"}',1780003745000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(26,'dd977b5f-7fd6-4423-8dff-2b8f4b503064','episode.position',1,'23dfb60f-a29c-4cf0-9abd-3f04d551818f','{"position":133.0}',1780003746000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(27,'4934f1e0-3a6a-4192-9489-cd02068fbc04','episode.delete',1,'23dfb60f-a29c-4cf0-9abd-3f04d551818f','{}',1780003747000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(28,'d35a4374-4a37-41dd-add8-b1fe0fe9742d','episode.restore',1,'23dfb60f-a29c-4cf0-9abd-3f04d551818f','{}',1780003748000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(29,'01ab593a-d585-4dd3-b8a5-98fa4dcda8ea','feed.subscribe',1,'029a80f0-7809-439e-a381-5603517a93e8','{"title":"fixture text 135 ünïcode ✓","url":"https://example.com/fixture/134"}',1780003749000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(30,'72326706-adbc-4c63-89ff-43702072537b','feed.rename',1,'029a80f0-7809-439e-a381-5603517a93e8','{"title":"fixture text 136 ünïcode ✓"}',1780003750000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(31,'38921ba7-fd8a-46f7-bcfc-f34b964f4828','feed.unsubscribe',1,'029a80f0-7809-439e-a381-5603517a93e8','{}',1780003751000,62,0,NULL);
INSERT INTO chronicle_outbox VALUES(32,'3550a4df-499d-48e2-9fa6-a50b3ff23a00','feed.resubscribe',1,'029a80f0-7809-439e-a381-5603517a93e8','{}',1780003752000,62,0,NULL);
CREATE TABLE chronicle_shadowed (entity TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID;
INSERT INTO chronicle_shadowed VALUES('article','02ff79ba-932d-47fc-9c7e-b600d2257c88');
INSERT INTO chronicle_shadowed VALUES('collection','36feccee-0840-4b50-a2da-d025e4e33326');
INSERT INTO chronicle_shadowed VALUES('episode','23dfb60f-a29c-4cf0-9abd-3f04d551818f');
INSERT INTO chronicle_shadowed VALUES('feed','029a80f0-7809-439e-a381-5603517a93e8');
INSERT INTO chronicle_shadowed VALUES('highlight','85576ffc-908a-4c6b-b9cd-6c9a851bcaf3');
INSERT INTO chronicle_shadowed VALUES('note','12546fe7-a53e-4736-a1a0-5efc0667e18e');
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
CREATE TABLE chronicle_segments (
  first_seq INTEGER PRIMARY KEY,
  last_seq INTEGER NOT NULL,
  op_count INTEGER NOT NULL,
  body BLOB NOT NULL,
  digest TEXT NOT NULL,
  previous_digest TEXT NOT NULL,
  body_bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  CHECK (last_seq >= first_seq AND op_count = last_seq - first_seq + 1)
);
CREATE TABLE chronicle_sealed_ops (op_id TEXT PRIMARY KEY NOT NULL, server_seq INTEGER NOT NULL, device_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "chronicle_snapshots" (
  seq INTEGER PRIMARY KEY,
  state_digest TEXT NOT NULL,
  body_bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  body BLOB NOT NULL
);
CREATE TABLE chronicle_segment_filters (first_seq INTEGER PRIMARY KEY, filter BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS "library" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "plan" TEXT
);
INSERT INTO library VALUES('3e7f0c9c-7022-48a2-9f91-11e4b22b3495',1780000060000,'free');
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
  "author" TEXT,
  "text" TEXT,
  "word_count" INTEGER,
  "status" TEXT,
  "favorite" INTEGER,
  "progress" REAL,
  "progress__device" TEXT,
  "progress__time" INTEGER,
  "deleted_at" INTEGER
);
INSERT INTO article VALUES('b396d0da-8541-487a-bb41-e5cad3539a49',1780000120000,'https://example.com/fixture/2','fixture text 74 ünïcode ✓','fixture text 75 ünïcode ✓','fixture text 76 ünïcode ✓',77,'saved',0,0.78000000000000002664,'21cef29c-d862-4714-ae54-f2b0d7f83f2b',1780002640000,1780002820000);
INSERT INTO article VALUES('ec5bed08-2029-49ca-b03a-874a1ba266ee',1780002160000,'https://example.com/fixture/49','fixture text 50 ünïcode ✓','fixture text 51 ünïcode ✓',NULL,NULL,'saved',0,0.0,'6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1780002160000,NULL);
INSERT INTO article VALUES('02ff79ba-932d-47fc-9c7e-b600d2257c88',1780003721000,'https://example.com/fixture/95','fixture text 100 ünïcode ✓','fixture text 101 ünïcode ✓',NULL,NULL,'saved',0,0.040000000000000000832,'16b7b92f-7010-44f1-9b4e-23b99c6e5100',1780003723000,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_article" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "url" TEXT,
  "title" TEXT,
  "author" TEXT,
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
  "note__device" TEXT,
  "note__seq" INTEGER,
  "deleted_at" INTEGER
);
INSERT INTO highlight VALUES('36361ab6-2cde-4e08-8927-cfafec499c3d',1780000180000,'b396d0da-8541-487a-bb41-e5cad3539a49','fixture text 8 ünïcode ✓',9,'purple','fixture text 80 ünïcode ✓','21cef29c-d862-4714-ae54-f2b0d7f83f2b',48,1780002940000);
INSERT INTO highlight VALUES('d274d2a9-75a8-4fe4-973c-7162c511b48e',1780002220000,'ec5bed08-2029-49ca-b03a-874a1ba266ee','fixture text 55 ünïcode ✓',56,'blue','fixture text 58 ünïcode ✓','6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',37,NULL);
INSERT INTO highlight VALUES('85576ffc-908a-4c6b-b9cd-6c9a851bcaf3',1780003728000,'02ff79ba-932d-47fc-9c7e-b600d2257c88','fixture text 106 ünïcode ✓',107,'yellow','fixture text 111 ünïcode ✓','16b7b92f-7010-44f1-9b4e-23b99c6e5100',NULL,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_highlight" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "quote" TEXT,
  "position" INTEGER,
  "color" TEXT,
  "note" TEXT,
  "note__device" TEXT,
  "note__seq" INTEGER,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "note" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "article_id" TEXT,
  "body" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO note VALUES('786a1ed5-b539-45d6-986d-34bd88019409',1780000240000,'b396d0da-8541-487a-bb41-e5cad3539a49','fixture text 81 ünïcode ✓',1780003060000);
INSERT INTO note VALUES('659f3c08-b78a-4a06-a7e5-e66e8d0c8e07',1780002280000,'ec5bed08-2029-49ca-b03a-874a1ba266ee','fixture text 60 ünïcode ✓',NULL);
INSERT INTO note VALUES('12546fe7-a53e-4736-a1a0-5efc0667e18e',1780003732000,'02ff79ba-932d-47fc-9c7e-b600d2257c88','fixture text 114 ünïcode ✓',NULL);
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
INSERT INTO collection VALUES('0af9b436-ea6d-415d-b505-570ccb5c029e',1780000300000,'fixture text 82 ünïcode ✓',83.0,1780003420000);
INSERT INTO collection VALUES('2f183225-4391-4908-a843-e13d3c966a72',1780002340000,'fixture text 61 ünïcode ✓',62.0,NULL);
INSERT INTO collection VALUES('36feccee-0840-4b50-a2da-d025e4e33326',1780003736000,'fixture text 117 ünïcode ✓',118.0,NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_collection" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "name" TEXT,
  "position" REAL,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "collection_members" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "chronicle_shadow_collection_members" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "collection_episodes" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
CREATE TABLE IF NOT EXISTS "chronicle_shadow_collection_episodes" (id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, value));
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
INSERT INTO episode VALUES('c8f48ba6-d008-41f7-bbae-9baf5ce47700',1780000360000,'fixture text 88 ünïcode ✓','https://example.com/fixture/89','fixture text 90 ünïcode ✓',91.0,'fixture text 92 ünïcode ✓',93.0,'21cef29c-d862-4714-ae54-f2b0d7f83f2b',1780003540000,1780003600000);
INSERT INTO episode VALUES('db25bd78-bf9d-4376-a370-a3c5ebc77372',1780002400000,'fixture text 63 ünïcode ✓','https://example.com/fixture/64','fixture text 65 ünïcode ✓',66.0,'fixture text 67 ünïcode ✓',0.0,'6ff35b14-eed5-4bbf-b89c-aa27bea5bc9e',1780002400000,NULL);
INSERT INTO episode VALUES('23dfb60f-a29c-4cf0-9abd-3f04d551818f',1780003744000,'fixture text 128 ünïcode ✓','https://example.com/fixture/129','fixture text 130 ünïcode ✓',131.0,'fixture text 132 ünïcode ✓',133.0,'16b7b92f-7010-44f1-9b4e-23b99c6e5100',1780003746000,NULL);
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
CREATE TABLE IF NOT EXISTS "feed" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "url" TEXT,
  "title" TEXT,
  "deleted_at" INTEGER
);
INSERT INTO feed VALUES('743f1b37-b7f2-4ef2-b8d0-db8f2e906d14',1780000420000,'https://example.com/fixture/21','fixture text 94 ünïcode ✓',1780003720000);
INSERT INTO feed VALUES('26505b5b-239f-4544-bc66-e3f7bea14830',1780002460000,'https://example.com/fixture/68','fixture text 69 ünïcode ✓',NULL);
INSERT INTO feed VALUES('029a80f0-7809-439e-a381-5603517a93e8',1780003749000,'https://example.com/fixture/134','fixture text 136 ünïcode ✓',NULL);
CREATE TABLE IF NOT EXISTS "chronicle_shadow_feed" (
  id TEXT PRIMARY KEY NOT NULL,
  created_at INTEGER NOT NULL,
  "url" TEXT,
  "title" TEXT,
  "deleted_at" INTEGER
);
CREATE TABLE IF NOT EXISTS "chronicle_unreadable" (server_seq INTEGER PRIMARY KEY, op_id TEXT NOT NULL, type TEXT NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS "chronicle_conflicts" (
  op_id TEXT NOT NULL, field TEXT NOT NULL, entity TEXT NOT NULL, entity_id TEXT NOT NULL,
  kept, replaced, replaced_seq INTEGER, replaced_device TEXT,
  winning_seq INTEGER NOT NULL, winning_device TEXT NOT NULL, resolved_seq INTEGER,
  PRIMARY KEY (op_id, field)
);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','article_fts','article_fts',0,'CREATE VIRTUAL TABLE "article_fts" USING fts5("title", "author", "url", content="article_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'article_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO article_fts_data VALUES(1,X'0208080a');
INSERT INTO article_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO article_fts_data VALUES(137438953473,X'000001050330343902060102060102353002020402013102060101040103636f6d020601020401076578616d706c650206010203010766697874757265020e020101020102050105687474707302060102020104746578740208030101030107756e69636f6465020805010105000331343902060102060102353002020402013102060101040102636f020601020401026578020601020301026669020e02010102010205010268740206010202010274650208030101030102756e020805010105000432636f6d0206010204010365786102060102030103666978020e020101020102050103687474020601020201037465780208030101030103756e69020805010105040907080a0e120c0c0f0a070809090d090a0a0b0a0e0a0b');
INSERT INTO article_fts_data VALUES(274877906945,X'0000010303303935030601020602013603020402013703060101040103636f6d030601020401076578616d706c650306010203010766697874757265030e020101020102050105687474707303060102020104746578740308030101030107756e69636f64650308050101050003313935030601020602013603020402013703060101040102636f030601020401026578030601020301026669030e02010102010205010268740306010202010274650308030101030102756e030805010105000432636f6d0306010204010365786103060102030103666978030e020101020102050103687474030601020201037465780308030101030103756e69030805010105040906080a0e120c0c0f0a060809090d090a0a0b0a0e0a0b');
INSERT INTO article_fts_data VALUES(412316860417,X'0000012504303130300302040301310306010104010239350307010206020136030102013703010103636f6d030701020401076578616d706c650307010203010766697874757265030f020101020102050105687474707303070102020104746578740309030101030107756e69636f64650309050101050003313130030804010104010239350307010206020136030102013703010102636f030701020401026578030701020301026669030f02010102010205010268740307010202010274650309030101030102756e03090501010500043231303003020403013103060101040103636f6d0307010204010365786103070102030103666978030f020101020102050103687474030701020201037465780309030101030103756e690309050101050408080905050a0e120c0c0f0b09050509090d090a0a09080a0a0e0a0b');
INSERT INTO article_fts_data VALUES(549755813889,X'000000b70430313030030103013103010102393503010103636f6d030101076578616d706c650301010766697874757265030101056874747073030101047465787403010107756e69636f64650301000331313003010102393503010102636f03010102657803010102666903010102687403010102746503010102756e0301000432313030030103013103010103636f6d0301010365786103010103666978030101036874740301010374657803010103756e69030104070506070b0b09080b070606060606060608050707070707');
INSERT INTO article_fts_data VALUES(687194767361,X'00000111043031303003020403013103060101040102393503060102060103636f6d030601020401076578616d706c650306010203010766697874757265030e020101020102050105687474707303060102020104746578740308030101030107756e69636f646503080501010500033131300308040101040102393503060102060102636f030601020401026578030601020301026669030e02010102010205010268740306010202010274650308030101030102756e03080501010500043231303003020403013103060101040103636f6d0306010204010365786103060102030103666978030e020101020102050103687474030601020201037465780308030101030103756e69030805010105040808090a0e120c0c0f0b0909090d090a0a09080a0a0e0a0b');
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
INSERT INTO article_text_fts_data VALUES(1,X'');
INSERT INTO article_text_fts_data VALUES(10,X'00000001000000');
CREATE TABLE IF NOT EXISTS 'article_text_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS 'article_text_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
CREATE TABLE IF NOT EXISTS 'article_text_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO article_text_fts_config VALUES('rank','bm25(1.0)');
INSERT INTO article_text_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','article_tags_fts','article_tags_fts',0,'CREATE VIRTUAL TABLE "article_tags_fts" USING fts5("value", content="article_tags_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'article_tags_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO article_tags_fts_data VALUES(1,X'0000');
INSERT INTO article_tags_fts_data VALUES(10,X'000000010102020002010101020101');
INSERT INTO article_tags_fts_data VALUES(137438953473,X'0000001e0530746167320102020003317461010202000432746167010202040908');
INSERT INTO article_tags_fts_data VALUES(274877906945,X'0000001b0530746167320101000331746101010004327461670101040807');
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
INSERT INTO highlight_fts_data VALUES(137438953473,X'0000008d0330353502020402013802060101040107666978747572650208020101020104746578740208030101030107756e69636f64650208050101050003313535020204020138020601010401026669020802010102010274650208030101030102756e02080501010500043266697802080201010201037465780208030101030103756e690208050101050407080f0c0f08080a0a0a0c0b');
INSERT INTO highlight_fts_data VALUES(274877906945,X'00000099043031303603020403013903060101040107666978747572650308020101020104746578740308030101030107756e69636f6465030805010105000331313003080401010401026669030802010102010274650308030101030102756e0308050101050004323130360302040301390306010104010366697803080201010201037465780308030101030103756e690308050101050408080f0c0f0b0a0a0a09080b0b');
INSERT INTO highlight_fts_data VALUES(412316860417,X'000000aa043031303603030403013903010202313103060101040107666978747572650309020101020104746578740309030101030107756e69636f64650309050101050003313130030304020131030601010401026669030902010102010274650309030101030102756e0309050101050004323130360303040301390301020231310306010104010366697803090201010201037465780309030101030103756e69030905010105040805090f0c0f08080a0a0a0905090b0b');
INSERT INTO highlight_fts_data VALUES(549755813889,X'0000007004303130360301020231310301010766697874757265030101047465787403010107756e69636f646503010003313130030102013103010102666903010102746503010102756e0301000432313036030102023131030101036669780301010374657803010103756e6903010407060b080b070506060608060707');
INSERT INTO highlight_fts_data VALUES(687194767361,X'000000a004303130360302040202313103060101040107666978747572650308020101020104746578740308030101030107756e69636f64650308050101050003313130030204020131030601010401026669030802010102010274650308030101030102756e030805010105000432313036030204020231310306010104010366697803080201010201037465780308030101030103756e690308050101050408090f0c0f08080a0a0a09090b0b');
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
INSERT INTO note_fts_data VALUES(137438953473,X'00000062033036300202040107666978747572650202020104746578740202030107756e69636f6465020205000331363002020401026669020202010274650202030102756e02020500043266697802020201037465780202030103756e6902020504070c090c080707070908');
INSERT INTO note_fts_data VALUES(274877906945,X'0000006b04303131330302040107666978747572650302020104746578740302030107756e69636f6465030205000331313103020401026669030202010274650302030102756e030205000432313133030204010366697803020201037465780302030103756e6903020504080c090c08070707090808');
INSERT INTO note_fts_data VALUES(412316860417,X'00000075043031313303010301340302040107666978747572650303020104746578740303030107756e69636f6465030305000331313103030401026669030302010274650303030102756e0303050004323131330301030134030204010366697803030201037465780303030103756e690303050407060c090c0807070708060808');
INSERT INTO note_fts_data VALUES(549755813889,X'0000005f04303131340301010766697874757265030101047465787403010107756e69636f64650301000331313103010102666903010102746503010102756e0301000432313134030101036669780301010374657803010103756e69030104070b080b07060606080707');
INSERT INTO note_fts_data VALUES(687194767361,X'0000006b04303131340302040107666978747572650302020104746578740302030107756e69636f6465030205000331313103020401026669030202010274650302030102756e030205000432313134030204010366697803020201037465780302030103756e6903020504080c090c08070707090808');
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
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','episode_fts','episode_fts',0,'CREATE VIRTUAL TABLE "episode_fts" USING fts5("title", "feed", "transcript", content="episode_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'episode_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO episode_fts_data VALUES(1,X'02080a08');
INSERT INTO episode_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO episode_fts_data VALUES(137438953473,X'0000010303303633020204020134020601010602013702060102040103636f6d020601010401076578616d706c650206010103010766697874757265020e020101050102020105687474707302060101020104746578740208030102030107756e69636f64650208050102050003313633020204020134020601010602013702060102040102636f020601010401026578020601010301026669020e02010105010202010268740206010102010274650208030102030102756e020805010205000432636f6d0206010104010365786102060101030103666978020e020101050102020103687474020601010201037465780208030102030103756e69020805010205040708080a0e120c0c0f08080809090d090a0a0b0a0e0a0b');
INSERT INTO episode_fts_data VALUES(274877906945,X'000001120430313233030204030134030601010603013703060102040103636f6d030601010401076578616d706c650306010103010766697874757265030e020101050102020105687474707303060101020104746578740308030102030107756e69636f64650308050102050003313132030e040101060102040102636f030601010401026578030601010301026669030e02010105010202010268740306010102010274650308030102030102756e030805010205000432313233030204030134030601010603013703060102040103636f6d0306010104010365786103060101030103666978030e020101050102020103687474030601010201037465780308030102030103756e69030805010205040808080a0e120c0c0f0e09090d090a0a0908080a0a0e0a0b');
INSERT INTO episode_fts_data VALUES(412316860417,X'00000137043031323303010301340301030137030103013803020403013903060101060202333203060102040103636f6d030701010401076578616d706c650307010103010766697874757265030f020101050102020105687474707303070101020104746578740309030102030107756e69636f6465030905010205000331313203090401010602013303060102040102636f030701010401026578030701010301026669030f02010105010202010268740307010102010274650309030102030102756e03090501020500043231323303010301340301030137030103013803020403013903060101060202333203060102040103636f6d0307010104010365786103070101030103666978030f020101050102020103687474030701010201037465780309030102030103756e69030905010205040705050608090a0e120c0c0f0b0809090d090a0a0805050608090a0a0e0a0b');
INSERT INTO episode_fts_data VALUES(549755813889,X'000000bc0430313238030103013903010202333203010103636f6d030101076578616d706c650301010766697874757265030101056874747073030101047465787403010107756e69636f646503010003313132030102013303010102636f03010102657803010102666903010102687403010102746503010102756e0301000432313238030103013903010202333203010103636f6d0301010365786103010103666978030101036874740301010374657803010103756e69030104070506070b0b09080b07050606060606060805060707070707');
INSERT INTO episode_fts_data VALUES(687194767361,X'00000119043031323803020403013903060101060202333203060102040103636f6d030601010401076578616d706c650306010103010766697874757265030e020101050102020105687474707303060101020104746578740308030102030107756e69636f6465030805010205000331313203080401010602013303060102040102636f030601010401026578030601010301026669030e02010105010202010268740306010102010274650308030102030102756e03080501020500043231323803020403013903060101060202333203060102040103636f6d0306010104010365786103060101030103666978030e020101050102020103687474030601010201037465780308030102030103756e69030805010205040808090a0e120c0c0f0b0809090d090a0a0908090a0a0e0a0b');
CREATE TABLE IF NOT EXISTS 'episode_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO episode_fts_idx VALUES(1,X'',2);
INSERT INTO episode_fts_idx VALUES(2,X'',2);
INSERT INTO episode_fts_idx VALUES(3,X'',2);
INSERT INTO episode_fts_idx VALUES(4,X'',2);
INSERT INTO episode_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'episode_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO episode_fts_docsize VALUES(2,X'040504');
INSERT INTO episode_fts_docsize VALUES(3,X'040504');
CREATE TABLE IF NOT EXISTS 'episode_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO episode_fts_config VALUES('rank','bm25(10.0, 2.0, 1.0)');
INSERT INTO episode_fts_config VALUES('version',4);
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','feed_fts','feed_fts',0,'CREATE VIRTUAL TABLE "feed_fts" USING fts5("title", "url", content="feed_fts_content", content_rowid=''rid'', tokenize=''unicode61 remove_diacritics 2'', prefix=''2 3'')');
CREATE TABLE IF NOT EXISTS 'feed_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO feed_fts_data VALUES(1,X'02080a');
INSERT INTO feed_fts_data VALUES(10,X'000000010105050005010101020101030101040101050101');
INSERT INTO feed_fts_data VALUES(137438953473,X'000000d80330363802060101060201390202040103636f6d020601010401076578616d706c6502060101030107666978747572650208020101050105687474707302060101020104746578740202030107756e69636f6465020205000331363802060101060201390202040102636f020601010401026578020601010301026669020802010105010268740206010102010274650202030102756e020205000432636f6d02060101040103657861020601010301036669780208020101050103687474020601010201037465780202030103756e690202050409060a0e0f0c090c0a0609090a0907070b0a0b0a08');
INSERT INTO feed_fts_data VALUES(274877906945,X'000000e4043031333403060101060301350302040103636f6d030601010401076578616d706c6503060101030107666978747572650308020101050105687474707303060101020104746578740302030107756e69636f646503020500033131330308040101060102636f030601010401026578030601010301026669030802010105010268740306010102010274650302030102756e03020500043231333403060101060301350302040103636f6d03060101040103657861030601010301036669780308020101050103687474030601010201037465780302030103756e69030205040a060a0e0f0c090c0b09090a0907070b060a0a0b0a08');
INSERT INTO feed_fts_data VALUES(412316860417,X'000000ee0430313334030701010603013503010301360302040103636f6d030701010401076578616d706c6503070101030107666978747572650309020101050105687474707303070101020104746578740303030107756e69636f646503030500033131330309040101060102636f030701010401026578030701010301026669030902010105010268740307010102010274650303030102756e030305000432313334030701010603013503010301360302040103636f6d03070101040103657861030701010301036669780309020101050103687474030701010201037465780303030103756e69030305040a05060a0e0f0c090c0b09090a0907070b05060a0a0b0a08');
INSERT INTO feed_fts_data VALUES(549755813889,X'000000ab0430313334030103013603010103636f6d030101076578616d706c650301010766697874757265030101056874747073030101047465787403010107756e69636f64650301000331313303010102636f03010102657803010102666903010102687403010102746503010102756e0301000432313334030103013603010103636f6d0301010365786103010103666978030101036874740301010374657803010103756e690301040705070b0b09080b0706060606060608050707070707');
INSERT INTO feed_fts_data VALUES(687194767361,X'000000e4043031333403060101060301360302040103636f6d030601010401076578616d706c6503060101030107666978747572650308020101050105687474707303060101020104746578740302030107756e69636f646503020500033131330308040101060102636f030601010401026578030601010301026669030802010105010268740306010102010274650302030102756e03020500043231333403060101060301360302040103636f6d03060101040103657861030601010301036669780308020101050103687474030601010201037465780302030103756e69030205040a060a0e0f0c090c0b09090a0907070b060a0a0b0a08');
CREATE TABLE IF NOT EXISTS 'feed_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO feed_fts_idx VALUES(1,X'',2);
INSERT INTO feed_fts_idx VALUES(2,X'',2);
INSERT INTO feed_fts_idx VALUES(3,X'',2);
INSERT INTO feed_fts_idx VALUES(4,X'',2);
INSERT INTO feed_fts_idx VALUES(5,X'',2);
CREATE TABLE IF NOT EXISTS 'feed_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO feed_fts_docsize VALUES(2,X'0405');
INSERT INTO feed_fts_docsize VALUES(3,X'0405');
CREATE TABLE IF NOT EXISTS 'feed_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO feed_fts_config VALUES('rank','bm25(5.0, 1.0)');
INSERT INTO feed_fts_config VALUES('version',4);
CREATE INDEX chronicle_log_by_entity ON chronicle_log(entity_id, server_seq);
CREATE TRIGGER chronicle_log_append_only_update BEFORE UPDATE ON chronicle_log BEGIN
  SELECT RAISE(ABORT, 'chronicle_log is append-only: confirmed ops are never updated');
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
CREATE TRIGGER chronicle_segments_immutable BEFORE UPDATE ON chronicle_segments BEGIN SELECT RAISE(ABORT, 'chronicle_segments: a sealed segment is never changed'); END;
CREATE TRIGGER chronicle_segments_dropped_only_behind_a_snapshot BEFORE DELETE ON chronicle_segments
WHEN OLD.last_seq > coalesce((SELECT max(seq) FROM chronicle_snapshots), 0) BEGIN
  SELECT RAISE(ABORT, 'chronicle_segments: history is dropped only where a snapshot covers it');
END;
CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id)
 AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id)
 AND NOT EXISTS (SELECT 1 FROM chronicle_sealed_ops WHERE op_id = OLD.op_id) BEGIN
  SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
END;
CREATE TRIGGER chronicle_segment_filters_follow AFTER DELETE ON chronicle_segments BEGIN
  DELETE FROM chronicle_segment_filters WHERE first_seq = OLD.first_seq;
END;
CREATE TRIGGER chronicle_segments_contiguous BEFORE INSERT ON chronicle_segments
WHEN NEW.first_seq IS NOT coalesce((SELECT last_seq FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1),
                                   (SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0) + 1 BEGIN
  SELECT RAISE(ABORT, 'chronicle_segments: a segment must continue the sealed prefix without a gap');
END;
CREATE TRIGGER chronicle_log_leaves_only_sealed BEFORE DELETE ON chronicle_log
WHEN OLD.server_seq > max(coalesce((SELECT last_seq FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1), 0),
                          coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) BEGIN
  SELECT RAISE(ABORT, 'chronicle_log is append-only: only ops sealed into a segment leave it');
END;
CREATE TRIGGER chronicle_log_gap_free BEFORE INSERT ON chronicle_log
WHEN NEW.server_seq IS NOT max(coalesce((SELECT max(server_seq) FROM chronicle_log), 0),
                               coalesce((SELECT last_seq FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1), 0),
                               coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) + 1 BEGIN
  SELECT RAISE(ABORT, 'chronicle_log: server_seq must follow the last confirmed op without a gap');
END;
CREATE INDEX "article_tags_by_value" ON "article_tags"(value);
CREATE INDEX "highlight_by_article_id" ON "highlight"("article_id");
CREATE INDEX "note_by_article_id" ON "note"("article_id");
CREATE INDEX "collection_members_by_value" ON "collection_members"(value);
CREATE INDEX "collection_episodes_by_value" ON "collection_episodes"(value);
CREATE INDEX "chronicle_conflicts_by_entity" ON "chronicle_conflicts"(entity_id, field);
CREATE VIEW "article_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."author" AS "author", t."url" AS "url" FROM "article" t WHERE t.deleted_at IS NULL;
CREATE VIEW "article_text_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."text" AS "text" FROM "article" t WHERE t.deleted_at IS NULL AND EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium');
CREATE TRIGGER "article_text_fts_plan_on" AFTER UPDATE OF "plan" ON "library" WHEN new."plan" = 'premium' AND old."plan" IS NOT 'premium' BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); INSERT INTO "article_text_fts"(rowid, "text") SELECT rid, "text" FROM "article_text_fts_content"; END;
CREATE TRIGGER "article_text_fts_plan_new" AFTER INSERT ON "library" WHEN new."plan" = 'premium' AND (SELECT count(*) FROM "library" WHERE "plan" = 'premium') = 1 BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); INSERT INTO "article_text_fts"(rowid, "text") SELECT rid, "text" FROM "article_text_fts_content"; END;
CREATE TRIGGER "article_text_fts_plan_off" AFTER UPDATE OF "plan" ON "library" WHEN old."plan" = 'premium' AND new."plan" IS NOT 'premium' AND NOT EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium') BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); END;
CREATE TRIGGER "article_text_fts_plan_gone" AFTER DELETE ON "library" WHEN old."plan" = 'premium' AND NOT EXISTS (SELECT 1 FROM "library" WHERE "plan" = 'premium') BEGIN INSERT INTO "article_text_fts"("article_text_fts") VALUES ('delete-all'); END;
CREATE VIEW "article_tags_fts_content" AS SELECT s.rowid AS rid, s.id AS id, s.id AS owner_id, s.value AS value FROM "article_tags" s JOIN "article" t ON t.id = s.id WHERE t.deleted_at IS NULL;
CREATE VIEW "highlight_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t."article_id" AS owner_id, t."quote" AS "quote", t."note" AS "note" FROM "highlight" t JOIN "article" o ON o.id = t."article_id" WHERE t.deleted_at IS NULL AND o.deleted_at IS NULL;
CREATE VIEW "note_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t."article_id" AS owner_id, t."body" AS "body" FROM "note" t JOIN "article" o ON o.id = t."article_id" WHERE t.deleted_at IS NULL AND o.deleted_at IS NULL;
CREATE VIEW "episode_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."feed" AS "feed", t."transcript" AS "transcript" FROM "episode" t WHERE t.deleted_at IS NULL;
CREATE VIEW "feed_fts_content" AS SELECT t.rowid AS rid, t.id AS id, t.id AS owner_id, t."title" AS "title", t."url" AS "url" FROM "feed" t WHERE t.deleted_at IS NULL;
PRAGMA writable_schema=OFF;
COMMIT;
