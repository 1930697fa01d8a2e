//! `ListTasks` on a `task-owner` route: the agent's pages hold every caller's tasks, and
//! only the caller's are kept (`Caller::keep_own`). A page that lost tasks that way is
//! filled from the agent's next pages, each asked for no more than the room left (so no
//! task is ever skipped: the next page token always follows the last task taken), up to
//! `MORE_PAGES` more calls; then the page is returned as it is, shorter than asked, with
//! the token that continues it.

use crate::backend::{Answer, Backend, Call, Error};
use crate::proto::ListTasksRequest;
use crate::protocol::ops::{Reply, UnaryRequest};

use super::Caller;

/// Agent pages asked beyond the first to fill one page (each a fan-out over endpoints on
/// a route with affinity).
pub const MORE_PAGES: usize = 4;
/// The page size when the request names none, and the largest (spec: `ListTasksRequest`).
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 100;

/// The caller's own tasks of a listing, from up to `1 + MORE_PAGES` agent pages.
pub async fn own_tasks(
    caller: &Caller,
    backend: &dyn Backend,
    request: ListTasksRequest,
    call: &Call<UnaryRequest>,
) -> Result<Answer<Reply>, Error> {
    let size = request.page_size.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let ask = |request: ListTasksRequest| Call {
        request: UnaryRequest::ListTasks(request),
        forwarded: call.forwarded.clone(),
        deadline: call.deadline,
        trace: call.trace.clone(),
    };
    let mut answer = backend.unary(ask(request.clone())).await?;
    let Reply::ListTasks(list) = &mut answer.value else {
        return Ok(answer);
    };
    caller.keep_own(list);
    for _ in 0..MORE_PAGES {
        let room = size as usize - list.tasks.len().min(size as usize);
        if room == 0 || list.next_page_token.is_empty() {
            break;
        }
        let next = ListTasksRequest {
            page_token: std::mem::take(&mut list.next_page_token),
            page_size: Some(room as i32),
            ..request.clone()
        };
        let more = backend.unary(ask(next)).await?;
        let Reply::ListTasks(mut page) = more.value else {
            break;
        };
        caller.keep_own(&mut page);
        list.tasks.append(&mut page.tasks);
        list.next_page_token = page.next_page_token;
    }
    list.page_size = size;
    list.total_size = i32::try_from(list.tasks.len()).unwrap_or(i32::MAX);
    Ok(answer)
}
