//! The interruption queue over `aws-sdk-sqs`.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use tokio::sync::OnceCell;

use crate::port::{ApiError, PortFuture, Queue, QueueMessage};
use crate::rate::RateLimits;
use crate::sdk::api_error;

/// The queue named `name`, its URL looked up once.
pub struct SqsQueue {
    client: Client,
    name: String,
    url: OnceCell<String>,
    limits: RateLimits,
}

impl SqsQueue {
    /// The queue `name` through `client`.
    pub fn new(client: Client, name: String, limits: RateLimits) -> Self {
        Self {
            client,
            name,
            url: OnceCell::new(),
            limits,
        }
    }

    async fn url(&self) -> Result<&str, ApiError> {
        self.url
            .get_or_try_init(|| async {
                self.limits.read().await;
                let out = self
                    .client
                    .get_queue_url()
                    .queue_name(&self.name)
                    .send()
                    .await
                    .map_err(api_error)?;
                Ok(out.queue_url().unwrap_or_default().to_owned())
            })
            .await
            .map(String::as_str)
    }
}

impl Queue for SqsQueue {
    fn receive(&self) -> PortFuture<'_, Vec<QueueMessage>> {
        Box::pin(async move {
            let url = self.url().await?;
            self.limits.read().await;
            let out = self
                .client
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .send()
                .await
                .map_err(api_error)?;
            Ok(out
                .messages()
                .iter()
                .filter_map(|m| {
                    Some(QueueMessage {
                        receipt: m.receipt_handle()?.to_owned(),
                        body: m.body().unwrap_or_default().to_owned(),
                    })
                })
                .collect())
        })
    }

    fn delete(&self, receipts: Vec<String>) -> PortFuture<'_, ()> {
        Box::pin(async move {
            if receipts.is_empty() {
                return Ok(());
            }
            let url = self.url().await?;
            for chunk in receipts.chunks(10) {
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(r)
                            .build()
                            .map_err(|e| ApiError {
                                kind: crate::port::ApiErrorKind::Construction,
                                code: None,
                                message: e.to_string(),
                                status: None,
                                retry_after: None,
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                self.limits.write().await;
                self.client
                    .delete_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(api_error)?;
            }
            Ok(())
        })
    }
}
